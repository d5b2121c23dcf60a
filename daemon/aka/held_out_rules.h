#pragma once
// akad's own held-out shapes for AKA tasks whose visible shapes are a plain list (docs/aka.md,
// "Generated held-out shapes"): a runner's `TEST_SHAPES = [...]` of integer tuples (or plain
// integers). The rules make sizes the visible list does not have: odd and prime sizes, the
// largest shape scaled up, the smallest scaled down, another aspect ratio. The scorer keeps a
// generated shape only where the pristine baseline passes it, so a rule never asks more than
// the task was made for; generated shapes never reach the agent.

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace akad::aka {

using Shape = std::vector<std::int64_t>;

struct ShapeList {
  std::vector<Shape> shapes;
  bool scalars = false;  // a list of integers, not of tuples
};

// The TEST_SHAPES list of a runner, if it is plain: integer literals, tuples of them, commas,
// comments and white space only (an Error says what else it holds).
Result<ShapeList> parseTestShapes(const std::string& runnerText);

// A pytest parametrize list of sizes (rocmbench's test files hold kernel and tests together):
// the first `@pytest.mark.parametrize("NAME", [integers...])` with one argument name that does
// not name a launch parameter (block, warps, stages, tile, split, group, stride, seed), values
// of at least 64, and a decorated function that is not a performance test; its decorator text,
// from `@` to the list's `]`, occurs once in the file.
struct ParametrizedSizes {
  ShapeList list;         // scalars
  std::string decorator;  // the text to replace
  std::string prefix;     // the decorator up to the list's `[`
};
Result<ParametrizedSizes> parseParametrizedSizes(const std::string& text);
// The decorator with `sizes` as its list.
std::string parametrizeCode(const std::string& prefix, const std::vector<Shape>& sizes);

struct GeneratedShape {
  Shape shape;
  std::string rule;  // "prime" | "scaled-up" | "scaled-down" | "aspect"
};
// At most `max` shapes, none of them visible, each no larger (in elements) than `growth` times
// the largest visible one. Deterministic.
std::vector<GeneratedShape> generateShapes(const ShapeList& visible, std::size_t max = 6, std::int64_t growth = 4);

// `TEST_SHAPES = [...]` code for a list of shapes, in the visible list's form.
std::string testShapesCode(const std::vector<Shape>& shapes, bool scalars);

}  // namespace akad::aka
