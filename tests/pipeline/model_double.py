#!/usr/bin/env python3
"""A test double for the model APIs that Claude Code and Codex call, for akad's end-to-end agent
tests (tests/pipeline/agent_cli_test.cc, docs/agents.md "The model-API test double").

It speaks enough of the Anthropic Messages API (POST /v1/messages, streamed as server-sent
events) and of the OpenAI Responses API (POST /v1/responses, streamed) to drive one scripted
session through the CLI's own tools:

  1. read the kernel file,
  2. write the improved kernel (the content of --solution) over it,
  3. run the visible tests (--test-command),
  4. finish with a short summary.

The step is worked out from the conversation the CLI sends back (how many tool results it
holds), not from state kept here, so side requests (titles, token counts, model lists) never
move the script. Every request is logged, one JSON line each, to --log. Python 3 stdlib only.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MODEL_IDS = ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]
OPENAI_MODEL_IDS = ["gpt-5-codex", "gpt-5"]


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


class Script:
    """What the scripted session does, for either API."""

    def __init__(self, workdir, kernel, solution_text, test_command):
        self.workdir = workdir
        self.kernel = kernel
        self.solution = solution_text
        self.test_command = test_command


# ---------------------------------------------------------------- Anthropic Messages API


def anthropic_step(body):
    """How many of our tool calls the conversation already answered."""
    done = 0
    for m in body.get("messages", []):
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        done += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return done


def last_tool_result(body):
    """The last tool result the conversation holds, or None."""
    for m in reversed(body.get("messages", [])):
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        for b in reversed(content):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                return b
    return None


def anthropic_blocks(script, body):
    """The content blocks of the next assistant turn and its stop reason."""
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    if not {"Read", "Write", "Bash"} <= tools:
        # A side request (a title, a summary, a check): a short plain answer.
        return [{"type": "text", "text": "Optimising the softmax kernel"}], "end_turn"
    path = script.workdir + "/" + script.kernel
    step = anthropic_step(body)
    if step == 0:
        return [{"type": "text", "text": "I will read the kernel first."},
                {"type": "tool_use", "id": new_id("toolu_"), "name": "Read", "input": {"file_path": path}}], "tool_use"
    if step == 1:
        return [{"type": "text", "text": "Writing a faster kernel: one exp per element, vectorisable."},
                {"type": "tool_use", "id": new_id("toolu_"), "name": "Write",
                 "input": {"file_path": path, "content": script.solution}}], "tool_use"
    if step == 2:
        return [{"type": "tool_use", "id": new_id("toolu_"), "name": "Bash",
                 "input": {"command": script.test_command, "description": "Run the visible tests",
                           "timeout": 600000}}], "tool_use"  # ms; its default, 2 min, is short on a busy host
    # Claude Code marks a command that exits non-zero as an error result.
    result = last_tool_result(body) or {}
    verdict = "The visible tests failed." if result.get("is_error") else "The visible tests pass."
    return [{"type": "text", "text": "Done: kernel.cpp now evaluates exp once per element. " + verdict}], "end_turn"


def anthropic_message(body, blocks, stop_reason):
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": body.get("model", MODEL_IDS[0]),
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def anthropic_events(body, blocks, stop_reason):
    """The server-sent events of one streamed message."""
    msg = anthropic_message(body, [], None)
    msg["usage"]["output_tokens"] = 1
    yield "message_start", {"type": "message_start", "message": msg}
    yield "ping", {"type": "ping"}
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "text_delta", "text": b["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"],
                                                            "input": {}}}
            text = json.dumps(b["input"])
            for k in range(0, len(text), 2048):
                yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "input_json_delta", "partial_json": text[k:k + 2048]}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


# ---------------------------------------------------------------- OpenAI Responses API


def openai_outputs(body):
    """The tool outputs the conversation already holds, in order."""
    out = []
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = item.get("output")
            out.append(o if isinstance(o, str) else json.dumps(o))
    return out


def openai_tool_names(body):
    """Every tool the request offers, by name: its type ("function", "custom"). Codex lists some
    at the top level and, in code mode, nests them in an `additional_tools` input item."""
    names = {}

    def walk(tools):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                walk(t.get("tools"))
            elif t.get("name"):
                names[t["name"]] = t.get("type", "function")

    walk(body.get("tools"))
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            walk(item.get("tools"))
    return names


def patch_add(path, text):
    """apply_patch's format for a new file with `text`."""
    body = "".join("+" + line + "\n" for line in text.rstrip("\n").split("\n"))
    return "*** Begin Patch\n*** Add File: {}\n{}*** End Patch\n".format(path, body)


def patch_delete(path):
    # One patch may not both delete and add a path; two patches replace the whole file.
    return "*** Begin Patch\n*** Delete File: {}\n*** End Patch\n".format(path)


def code_mode_item(source):
    """Codex's code mode: one custom tool, `exec`, running JavaScript that calls the nested tools."""
    return {"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"), "name": "exec",
            "input": source, "status": "completed"}


def openai_items(script, body):
    """The output items of the next response."""
    tools = openai_tool_names(body)
    if not tools:
        return [message_item("Optimising the softmax kernel")]
    outputs = openai_outputs(body)
    step = len(outputs)
    if tools.get("exec") == "custom":
        if step == 0:
            return [code_mode_item("const r = await tools.exec_command({cmd: %s, yield_time_ms: 10000});\n"
                                   "text(r.output);\n" % json.dumps("cat " + script.kernel))]
        if step == 1:
            return [code_mode_item("text(await tools.apply_patch(%s));\ntext(await tools.apply_patch(%s));\n"
                                   % (json.dumps(patch_delete(script.kernel)),
                                      json.dumps(patch_add(script.kernel, script.solution))))]
        if step == 2:
            # exec_command hands back a session after at most 30 s; poll it until the command ends.
            return [code_mode_item("// @exec: {\"yield_time_ms\": 600000}\n"
                                   "let r = await tools.exec_command({cmd: %s, yield_time_ms: 30000});\n"
                                   "let out = r.output;\n"
                                   "while (r.exit_code === undefined && r.session_id !== undefined) {\n"
                                   "  r = await tools.write_stdin({session_id: r.session_id, yield_time_ms: 30000});\n"
                                   "  out += r.output;\n"
                                   "}\n"
                                   "text(out);\ntext(\"exit code \" + r.exit_code);\n"
                                   % json.dumps(script.test_command))]
    elif step == 0:
        name, args = shell_call(tools, "cat " + script.kernel)
        return [function_item(name, args)]
    elif step == 1:
        name, args = shell_call(tools, "cat > {} <<'AKA_EOF'\n{}AKA_EOF".format(script.kernel, script.solution))
        return [function_item(name, args)]
    elif step == 2:
        name, args = shell_call(tools, script.test_command)
        return [function_item(name, args)]
    verdict = "The visible tests pass." if re.search(r"exit code:? 0\b", outputs[-1], re.I) else "The visible tests failed."
    return [message_item("Done: kernel.cpp now evaluates exp once per element. " + verdict)]


def function_item(name, args):
    return {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def message_item(text):
    return {"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def openai_response(body, items, status):
    return {"id": body.get("_resp_id") or new_id("resp_"), "object": "response", "created_at": int(time.time()),
            "status": status, "model": body.get("model", OPENAI_MODEL_IDS[0]), "output": items,
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}}


def openai_events(body, items):
    body["_resp_id"] = new_id("resp_")
    seq = 0

    def ev(kind, payload):
        nonlocal seq
        payload = dict(payload, type=kind, sequence_number=seq)
        seq += 1
        return kind, payload

    yield ev("response.created", {"response": openai_response(body, [], "in_progress")})
    yield ev("response.in_progress", {"response": openai_response(body, [], "in_progress")})
    for i, item in enumerate(items):
        started = dict(item, status="in_progress")
        if item["type"] == "message":
            started["content"] = []
        if item["type"] == "function_call":
            started["arguments"] = ""
        yield ev("response.output_item.added", {"output_index": i, "item": started})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield ev("response.content_part.added", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                     "part": {"type": "output_text", "text": "", "annotations": []}})
            yield ev("response.output_text.delta", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                    "delta": text})
            yield ev("response.output_text.done", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                   "text": text})
            yield ev("response.content_part.done", {"item_id": item["id"], "output_index": i, "content_index": 0,
                                                    "part": item["content"][0]})
        elif item["type"] == "function_call":
            yield ev("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": i,
                                                                "delta": item["arguments"]})
            yield ev("response.function_call_arguments.done", {"item_id": item["id"], "output_index": i,
                                                               "arguments": item["arguments"]})
        elif item["type"] == "custom_tool_call":
            yield ev("response.custom_tool_call_input.delta", {"item_id": item["id"], "output_index": i,
                                                               "delta": item["input"]})
            yield ev("response.custom_tool_call_input.done", {"item_id": item["id"], "output_index": i,
                                                              "input": item["input"]})
        yield ev("response.output_item.done", {"output_index": i, "item": item})
    yield ev("response.completed", {"response": openai_response(body, items, "completed")})


# ---------------------------------------------------------------- the server


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "akad-model-double/1"

    def log_message(self, fmt, *args):  # the JSON log is the record; keep stderr quiet
        pass

    def _path(self):
        # Through a proxy a kept-alive connection's later requests may arrive in absolute form.
        return urlsplit(self.path).path if self.path.startswith("http") else self.path.split("?")[0]

    def _log(self, body_text, status):
        entry = {"time": time.time(), "method": self.command, "target": self.path, "path": self._path(),
                 "status": status, "headers": {k.lower(): v for k, v in self.headers.items()
                                               if k.lower() not in ("authorization", "x-api-key")},
                 "auth": "authorization" in {k.lower() for k in self.headers} or "x-api-key" in
                 {k.lower() for k in self.headers}}
        try:
            entry["body"] = json.loads(body_text) if body_text else None
        except ValueError:
            entry["body_text"] = body_text[:4096]
        with self.server.log_lock:
            self.server.log.write(json.dumps(entry) + "\n")
            self.server.log.flush()

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            return self.rfile.read(n).decode("utf-8", "replace")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks).decode("utf-8", "replace")
        return ""

    def _json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", new_id("req_"))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", new_id("req_"))
        self.send_header("x-request-id", new_id("req_"))
        self.send_header("Connection", "close")
        self.end_headers()
        for kind, payload in events:
            self.wfile.write("event: {}\ndata: {}\n\n".format(kind, json.dumps(payload)).encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        self._log("", 200)
        path = self._path()
        if path.endswith("/models") and self.headers.get("anthropic-version"):
            self._json(200, {"data": [{"type": "model", "id": m, "display_name": m,
                                       "created_at": "2025-01-01T00:00:00Z"} for m in MODEL_IDS],
                             "has_more": False, "first_id": MODEL_IDS[0], "last_id": MODEL_IDS[-1]})
        elif path.endswith("/models"):
            # OpenAI's list; Codex's own catalog format reads `models` (empty: its built-in one).
            self._json(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                         "owned_by": "akad-double"} for m in OPENAI_MODEL_IDS],
                             "models": []})
        else:
            # Codex's WebSocket transport asks here first (the shipped definition turns it off).
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not served by the "
                                                                                           "test double: " + path}})

    def do_HEAD(self):
        self._log("", 200)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        text = self._read_body()
        path = self._path()
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {}
        script = self.server.script
        if path.endswith("/messages/count_tokens"):
            self._log(text, 200)
            self._json(200, {"input_tokens": max(1, len(text) // 4)})
        elif path.endswith("/messages"):
            self._log(text, 200)
            blocks, stop = anthropic_blocks(script, body)
            if body.get("stream"):
                self._sse(anthropic_events(body, blocks, stop))
            else:
                self._json(200, anthropic_message(body, blocks, stop))
        elif path.endswith("/responses"):
            self._log(text, 200)
            items = openai_items(script, body)
            if body.get("stream", False):
                self._sse(openai_events(body, items))
            else:
                self._json(200, openai_response(body, items, "completed"))
        else:
            self._log(text, 404)
            self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                        "message": "not served by the test double: " + path}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default="127.0.0.2")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="where to write the port once listening")
    ap.add_argument("--log", required=True, help="JSON lines, one per request")
    ap.add_argument("--workdir", default="/workspace", help="the agent's working directory")
    ap.add_argument("--kernel", default="kernel.cpp", help="the file to edit, relative to --workdir")
    ap.add_argument("--solution", required=True, help="the improved kernel to write")
    ap.add_argument("--test-command", default="make -f harness/Makefile test")
    a = ap.parse_args()
    with open(a.solution) as f:
        solution = f.read()
    server = ThreadingHTTPServer((a.listen, a.port), Handler)
    server.daemon_threads = True
    server.script = Script(a.workdir, a.kernel, solution, a.test_command)
    server.log = open(a.log, "a")
    server.log_lock = threading.Lock()
    port = server.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(a.port_file + ".tmp", a.port_file)
    print("listening on {}:{}".format(a.listen, port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
