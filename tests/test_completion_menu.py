"""A client whose completion menu is open sends its selected item with the inline completion
request (LSP 3.18 `selectedCompletionInfo`; VS Code does while its suggest widget shows): a
suggestion is shown only if it extends the item's text over the item's range. The real server,
its completions from the scripted llama-server stand-in (the prompt it was sent is read back
with the tiny model's tokenizer)."""

from __future__ import annotations

from lsprotocol import types

from lsp_complete.testing.lsp_client import inline, open_doc, replace, suggestion_of
from tests.lsp_helpers import start_server
from tests.test_remote_engine import fake, remote_options  # noqa: F401  (the fixture)

SOURCE = "def total(values):\n    result = 0\n    for value in values:\n        res\n" \
         "    return result\n"
LINE, COL = 3, len("        res")
TYPED = types.Range(start=types.Position(line=LINE, character=8),
                    end=types.Position(line=LINE, character=COL))


def _with_item(uri: str, line: int, col: int, item_range: types.Range,
               text: str) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=col),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic,
            selected_completion_info=types.SelectedCompletionInfo(range=item_range, text=text)),
    )


def _prompt_text(prompt, engine) -> str:
    """The prompt sent, as text: token ids read back with the tiny model's tokenizer, and
    the text that follows them (the healed part of the typed word)."""
    if isinstance(prompt, str):
        return prompt
    ids = [t for t in prompt if isinstance(t, int)]
    return engine.detokenize(ids) + "".join(t for t in prompt if isinstance(t, str))


async def _on_stand_in(fake, tiny_model_path):  # noqa: F811
    return await start_server(None, remote_options(fake.url, tiny_model_path,
                                                   remoteHealing="off", debounceMs=0))


async def _opened_and_asked(client, uri: str, item_range: types.Range, text: str):
    """Open SOURCE and ask at the end of `res` with the menu's item selected: (text, item)."""
    open_doc(client, uri, SOURCE)
    return suggestion_of(await client.text_document_inline_completion_async(
        _with_item(uri, LINE, COL, item_range, text)))


async def test_the_suggestion_extends_the_selected_item(fake, tiny_model_path,  # noqa: F811
                                                         engine) -> None:
    fake.pieces = [" += value", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        uri = "file:///work/total.py"
        text, item = await _opened_and_asked(client, uri, TYPED, "result")
        # The item's text and what follows it, over the item's range: the client shows it.
        assert text == "result += value"
        assert item is not None and item.range == TYPED
        # The model was asked as if the item were accepted.
        prompt = _prompt_text(fake.posts("/v1/completions")[-1]["prompt"], engine)
        assert prompt.endswith("\n        result"), prompt  # (the cursor's line comes last)
        # Accepting the item makes that text the document's: typing-ahead has the rest.
        asked = len(fake.posts("/v1/completions"))
        replace(client, uri, 2, TYPED, "result")
        after, _ = suggestion_of(await inline(client, uri, LINE, len("        result")))
        assert after == "result += value"  # (the typed word, then the rest)
        assert len(fake.posts("/v1/completions")) == asked
    finally:
        await client.shutdown_session()


async def test_an_item_elsewhere_than_the_cursor_is_ignored(fake, tiny_model_path,  # noqa: F811
                                                             engine) -> None:
    fake.pieces = ["ult += value", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        elsewhere = types.Range(start=types.Position(line=1, character=4),
                                end=types.Position(line=1, character=10))
        text, item = await _opened_and_asked(client, "file:///work/total.py", elsewhere,
                                             "results")
        assert text == "result += value" and item is not None and item.range == TYPED
        prompt = _prompt_text(fake.posts("/v1/completions")[-1]["prompt"], engine)
        assert prompt.endswith("\n        res"), prompt
    finally:
        await client.shutdown_session()


async def test_a_menu_item_of_several_lines_is_inserted_as_it_is(fake, tiny_model_path  # noqa: F811
                                                                 ) -> None:
    """Round 6: a menu item's later lines carry their own indentation, but the item did not
    say so (`insertTextMode` asIs): a client whose default is adjustIndentation (the spec's
    other mode; VS Code's) indents each of them again by the cursor line's indentation."""
    fake.pieces = ["ult += value\n", "        result *= 2\n", "    return result\n"]
    client = await start_server(None, remote_options(fake.url, tiny_model_path,
                                                     remoteHealing="off", debounceMs=0,
                                                     multiline="always"))
    try:
        uri = "file:///work/total.py"
        open_doc(client, uri, SOURCE)
        answer = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=LINE, character=COL)))
        assert isinstance(answer, types.CompletionList)
        (item,) = answer.items
        assert isinstance(item.text_edit, types.TextEdit)
        assert "\n        result *= 2" in item.text_edit.new_text
        assert item.insert_text_mode == types.InsertTextMode.AsIs
    finally:
        await client.shutdown_session()
