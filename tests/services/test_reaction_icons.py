"""The server's reaction icons: one still WebP per reaction, the same bytes and ids in
every process, found only by id and access hash together."""

from __future__ import annotations

import io

from PIL import Image, ImageFont

from telesrv.services.reaction_icons import ICON_SIZE, MIME_TYPE, ReactionIcons, draw_icon
from telesrv.services.reactions import AVAILABLE_REACTIONS


def test_every_reaction_has_a_distinct_decodable_icon() -> None:
    icons = ReactionIcons(AVAILABLE_REACTIONS, font_paths=())
    rows = [icons.document(e) for e in AVAILABLE_REACTIONS]
    assert len({r.id for r in rows}) == len(AVAILABLE_REACTIONS)
    assert all(0 < r.id < 2**63 for r in rows)
    for emoticon, row in zip(AVAILABLE_REACTIONS, rows, strict=True):
        icon = icons.find(row.id, row.access_hash)
        assert icon is not None and icon.emoticon == emoticon
        assert row.size == len(icon.data) and row.mime_type == MIME_TYPE
        image = Image.open(io.BytesIO(icon.data))
        assert image.format == "WEBP" and image.size == (ICON_SIZE, ICON_SIZE)


def test_without_an_emoji_font_each_reaction_still_looks_different() -> None:
    assert draw_icon("👍", None) != draw_icon("👎", None)


def test_same_ids_and_bytes_in_another_process() -> None:
    # Another process builds its own catalogue: what one lists, the other serves.
    one = ReactionIcons(AVAILABLE_REACTIONS, font_paths=())
    two = ReactionIcons(AVAILABLE_REACTIONS, font_paths=())
    for emoticon in AVAILABLE_REACTIONS:
        a, b = one.document(emoticon), two.document(emoticon)
        assert (a.id, a.access_hash, a.file_reference, a.size) == (
            b.id,
            b.access_hash,
            b.file_reference,
            b.size,
        )


def test_found_only_with_its_access_hash() -> None:
    icons = ReactionIcons(AVAILABLE_REACTIONS, font_paths=())
    row = icons.document("👍")
    assert icons.find(row.id, row.access_hash ^ 1) is None
    assert icons.find(row.id ^ 1, row.access_hash) is None


def test_a_font_that_cannot_be_read_falls_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.ttf"
    broken.write_bytes(b"not a font")
    icons = ReactionIcons(["👍"], font_paths=(str(broken),))
    assert icons.document("👍").size == len(draw_icon("👍", None))


def test_a_glyph_is_cropped_and_scaled_to_fill_the_icon() -> None:
    # Any outline font takes the glyph path; Pillow's own stands in for an emoji font.
    font = ImageFont.load_default(size=109)
    assert isinstance(font, ImageFont.FreeTypeFont)
    data = draw_icon("W", font)
    assert data != draw_icon("W", None)
    image = Image.open(io.BytesIO(data)).convert("RGBA")
    assert image.size == (ICON_SIZE, ICON_SIZE)
    box = image.getbbox()
    assert box is not None
    # The longer side of the glyph spans the icon; the shorter is centred.
    width, height = box[2] - box[0], box[3] - box[1]
    assert max(width, height) >= ICON_SIZE - 2
    assert abs(box[0] - (ICON_SIZE - box[2])) <= 2 and abs(box[1] - (ICON_SIZE - box[3])) <= 2
