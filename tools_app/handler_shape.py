"""Is a handler's source one function expression? Told from its syntax tree, never by
running it. Used inside the sandbox's check worker, after V8 has parsed the source (V8
names syntax errors and their lines; this only looks at the shape).

The tree is tree-sitter's (a parser, not an engine): the source is read as the platform
runs it, in parentheses, and must be exactly one arrow function or function expression;
a call of one (``(() => …)()``), a sequence, a class or any other value is refused.
"""

from __future__ import annotations

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser

FUNCTIONS = frozenset({"arrow_function", "function_expression", "function"})
_PARSER = Parser(Language(tree_sitter_javascript.language()))


def _named(node: Node) -> list[Node]:
    return [child for child in node.named_children if child.type != "comment"]


def is_one_function(source: str) -> bool:
    tree = _PARSER.parse(f"({source}\n)".encode("utf-8", "surrogatepass"))
    statements = _named(tree.root_node)
    if tree.root_node.has_error or len(statements) != 1:
        return False
    expression = _named(statements[0])
    if statements[0].type != "expression_statement" or len(expression) != 1:
        return False
    if expression[0].type != "parenthesized_expression":
        return False
    inner = _named(expression[0])
    return len(inner) == 1 and inner[0].type in FUNCTIONS
