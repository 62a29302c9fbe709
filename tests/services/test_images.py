"""Photo processing: renditions within their boxes, EXIF orientation, the stripped
preview a client rebuilds, and refusals of non-images, truncated images and bombs."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image
from telethon.utils import stripped_photo_to_jpg

from telesrv.services.errors import ImageProcessFailed, PhotoInvalidDimensions
from telesrv.services.images import THUMB_BOXES, process_image


def encoded(width: int, height: int, fmt: str = "JPEG", **save: object) -> bytes:
    image = Image.new("RGB", (width, height), (10, 200, 90))
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims the given size and holds almost no data (a decompression bomb
    needs no more to ask a decoder for width * height pixels)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_a_photo_gets_the_sizes_within_its_boxes() -> None:
    photo = process_image(encoded(1600, 1200))
    assert [(s.type, s.w, s.h) for s in photo.sizes] == [
        ("s", 100, 75),
        ("m", 320, 240),
        ("x", 800, 600),
        ("y", 1280, 960),
    ]
    for size in photo.sizes:
        with Image.open(io.BytesIO(size.jpeg)) as image:
            assert image.format == "JPEG" and image.size == (size.w, size.h)


def test_a_small_photo_gets_only_the_sizes_it_needs() -> None:
    photo = process_image(encoded(500, 250, "PNG"))
    assert [(s.type, s.w, s.h) for s in photo.sizes] == [
        ("s", 100, 50),
        ("m", 320, 160),
        ("x", 500, 250),
    ]
    tiny = process_image(encoded(60, 30))
    assert [(s.type, s.w, s.h) for s in tiny.sizes] == [("s", 60, 30)]
    thumb = process_image(encoded(1000, 500), THUMB_BOXES)
    assert [(s.type, s.w, s.h) for s in thumb.sizes] == [("m", 320, 160)]


def test_the_stripped_preview_rebuilds_into_a_jpeg() -> None:
    photo = process_image(encoded(1600, 1200))
    assert photo.stripped[0] == 1 and (photo.stripped[1], photo.stripped[2]) == (30, 40)
    with Image.open(io.BytesIO(stripped_photo_to_jpg(photo.stripped))) as preview:
        preview.load()
        assert preview.size == (40, 30)
        red, green, blue = preview.getpixel((20, 15))  # type: ignore[misc]
        assert abs(red - 10) < 24 and abs(green - 200) < 24 and abs(blue - 90) < 24


def test_exif_orientation_is_applied() -> None:
    image = Image.new("RGB", (400, 200), (0, 0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes())
    photo = process_image(out.getvalue())
    assert (photo.width, photo.height) == (200, 400)
    assert (photo.sizes[-1].w, photo.sizes[-1].h) == (200, 400)


def test_dimensions_at_and_past_the_limits() -> None:
    process_image(encoded(9000, 1000, "PNG"))  # width + height = 10000
    process_image(encoded(2000, 100, "PNG"))  # 20:1
    for width, height in ((9001, 1000), (2001, 100), (100, 2001)):
        with pytest.raises(PhotoInvalidDimensions):
            process_image(png_header_only(width, height))


def test_a_decompression_bomb_is_refused_before_decoding() -> None:
    with pytest.raises(PhotoInvalidDimensions):
        process_image(png_header_only(100_000, 100_000))
    with pytest.raises(PhotoInvalidDimensions):
        process_image(png_header_only(4999, 5002))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"this is a text file, not an image",
        b"%PDF-1.4\n" + b"0" * 100,
        encoded(300, 200)[:400],  # truncated JPEG
        png_header_only(300, 200),  # claims pixels it does not have
    ],
    ids=["empty", "text", "pdf", "truncated-jpeg", "short-png"],
)
def test_what_is_not_a_whole_image_is_refused(data: bytes) -> None:
    with pytest.raises(ImageProcessFailed):
        process_image(data)
