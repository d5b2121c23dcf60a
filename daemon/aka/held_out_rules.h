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

struct GeneratedShape {
  Shape shape;
  std::string rule;  // "prime" | "scaled-up" | "scaled-down" | "aspect"
};
// At most `max` shapes, none of them visible, each no larger (in elements) than four times the
// largest visible one. Deterministic.
std::vector<GeneratedShape> generateShapes(const ShapeList& visible, std::size_t max = 6);

// `TEST_SHAPES = [...]` code for a list of shapes, in the visible list's form.
std::string testShapesCode(const std::vector<Shape>& shapes, bool scalars);

}  // namespace akad::aka
