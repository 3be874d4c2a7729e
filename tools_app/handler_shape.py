"""What a handler's syntax tree says, never by running it: whether its source is one
function expression (inside the sandbox's check worker, after V8 has parsed the source:
V8 names syntax errors and their lines; this only looks at the shape), and which secrets
it reads by name (for the warnings when an agent is saved).

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


def _tree(source: str) -> Node:
    return _PARSER.parse(f"({source}\n)".encode("utf-8", "surrogatepass")).root_node


def is_one_function(source: str) -> bool:
    root = _tree(source)
    statements = _named(root)
    if root.has_error or len(statements) != 1:
        return False
    expression = _named(statements[0])
    if statements[0].type != "expression_statement" or len(expression) != 1:
        return False
    if expression[0].type != "parenthesized_expression":
        return False
    inner = _named(expression[0])
    return len(inner) == 1 and inner[0].type in FUNCTIONS


# ---------------------------------------------------------------- secrets read by name

SECRETS = "secrets"


def _walk(node: Node) -> list[Node]:
    nodes, stack = [], [node]
    while stack:
        current = stack.pop()
        nodes.append(current)
        stack.extend(reversed(current.children))
    return nodes


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "surrogatepass") if node is not None and node.text else ""


def _key(node: Node | None) -> str | None:
    """A property name written out: ``name``, ``"name"`` or ``'name'``."""
    if node is None:
        return None
    if node.type in ("property_identifier", "shorthand_property_identifier_pattern"):
        return _text(node)
    if node.type == "string":
        return "".join(_text(part) for part in node.named_children)
    return None


def secret_names(source: str) -> frozenset[str]:
    """The secrets a handler reads by a name written in its source: ``ctx.secrets.NAME``,
    ``ctx.secrets["NAME"]``, ``const { NAME } = ctx.secrets``, through ``{ secrets }``
    or ``const s = ctx.secrets`` too. A name computed at run time cannot be known here."""
    nodes = _walk(_tree(source))
    aliases = {SECRETS}  # identifiers that hold ctx.secrets

    def is_secrets(node: Node | None) -> bool:
        if node is None:
            return False
        if node.type == "identifier":
            return _text(node) in aliases
        return (
            node.type == "member_expression"
            and _text(node.child_by_field_name("property")) == SECRETS
        )

    for node in nodes:  # `{ secrets: s }` and `const s = ctx.secrets` name it too
        value = node.child_by_field_name("value")
        if node.type == "pair_pattern" and _key(node.child_by_field_name("key")) == SECRETS:
            if value is not None and value.type == "identifier":
                aliases.add(_text(value))
        name = node.child_by_field_name("name")
        if node.type == "variable_declarator" and name is not None and is_secrets(value):
            if name.type == "identifier":
                aliases.add(_text(name))
    names: set[str | None] = set()
    for node in nodes:
        if node.type == "member_expression" and is_secrets(node.child_by_field_name("object")):
            names.add(_key(node.child_by_field_name("property")))
        elif node.type == "subscript_expression" and is_secrets(node.child_by_field_name("object")):
            names.add(_key(node.child_by_field_name("index")))
        elif node.type == "variable_declarator" and is_secrets(node.child_by_field_name("value")):
            pattern = node.child_by_field_name("name")
            if pattern is not None and pattern.type == "object_pattern":
                for entry in pattern.named_children:
                    pair = entry.type == "pair_pattern"
                    names.add(_key(entry.child_by_field_name("key") if pair else entry))
    return frozenset(name for name in names if name)
