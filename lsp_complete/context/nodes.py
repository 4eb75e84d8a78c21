"""Questions about tree-sitter nodes that the head asks, answered per grammar (`LanguageSpec`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import tree_sitter

from lsp_complete.languages import LanguageSpec

# Body node types of containers that every grammar shares a name for.
_BODY_TYPES = frozenset({"block", "class_body", "declaration_list", "field_declaration_list",
                         "interface_body", "enum_body", "annotation_type_body",
                         "statement_block", "constructor_body"})


@cache
def body_types(spec: LanguageSpec) -> frozenset[str]:
    """Node types that count as a delimited body (a definition's block) for ``spec``."""
    return spec.blocks | _BODY_TYPES


def named_items(parent: tree_sitter.Node, spec: LanguageSpec,
                children: list[tree_sitter.Node] | None = None
                ) -> list[tuple[tree_sitter.Node, tree_sitter.Node]]:
    """(start node, node) for the named children (or those of them in `children`),
    flattening transparent nodes.

    The start node is the node itself or the first of the attributes glued to it.
    """
    items: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
    pending: tree_sitter.Node | None = None
    for child in parent.named_children if children is None else children:
        kind = child.type
        if kind in spec.comments:
            continue
        if kind in spec.transparent:
            items.extend(named_items(child, spec))
            pending = None
            continue
        if kind in spec.attached:
            pending = pending or child
            continue
        items.append((pending or child, child))
        pending = None
    return items


def unwrap(node: tree_sitter.Node, spec: LanguageSpec) -> tree_sitter.Node:
    while node.type in spec.wrappers:
        inner = (node.child_by_field_name("definition")
                 or node.child_by_field_name("declaration"))
        if inner is None:
            named = [c for c in node.named_children if c.type not in spec.comments]
            if not named or node.type == "export_statement":
                return node
            inner = named[-1]
        node = inner
    return node


def scope_start(node: tree_sitter.Node, spec: LanguageSpec,
                ancestors: Sequence[tree_sitter.Node]) -> tree_sitter.Node:
    """The node where a definition's header begins: its wrappers and attached attributes.

    ``ancestors``: the nodes above ``node``, the root first (``documents.node_path``), so
    that no step goes up through ``Node.parent``, which costs the depth.
    """
    start = node
    above = len(ancestors)
    while above > 0 and ancestors[above - 1].type in spec.wrappers:
        above -= 1
        start = ancestors[above]
    prev = start.prev_named_sibling
    while prev is not None and prev.type in spec.attached:
        start, prev = prev, prev.prev_named_sibling
    return start


def function_body(node: tree_sitter.Node, spec: LanguageSpec) -> tree_sitter.Node | None:
    if node.type in ("lexical_declaration", "variable_declaration"):
        value = single_declarator_value(node)
        if value is None or value.type not in spec.anonymous:
            return None
        node = value
    body = node.child_by_field_name("body")
    if body is not None and body.type in body_types(spec):
        return body
    return None


def signature_end(node: tree_sitter.Node, body: tree_sitter.Node, spec: LanguageSpec) -> int:
    """End of the last token before ``body``, skipping comments (`def f():  # note`)."""
    end = node.start_byte
    while True:
        inside: tree_sitter.Node | None = None
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if child.end_byte > body.start_byte:
                inside = child  # holds the body (`const f = () => {`): look inside it
                break
            if child.type not in spec.comments:
                end = child.end_byte
        if inside is None:
            return end
        node = inside


def single_declarator_value(node: tree_sitter.Node) -> tree_sitter.Node | None:
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    return declarators[0].child_by_field_name("value")
