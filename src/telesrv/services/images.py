"""Uploaded images made into the renditions clients download (CPU work: run in a thread).

A photo is served as JPEGs that fit square boxes (``s`` 100, ``m`` 320, ``x`` 800,
``y`` 1280 px; a small image gets only the boxes it needs) plus a stripped preview: a
tiny JPEG whose standard header clients add back themselves. The header they add has
the quantization tables of quality 20, 4:2:0 subsampling and the standard Huffman
tables, so the preview is encoded with exactly those and only its scan data is kept.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, ImageOps

from telesrv.services.errors import ImageProcessFailed, PhotoInvalidDimensions

PHOTO_BOXES: tuple[tuple[str, int], ...] = (("s", 100), ("m", 320), ("x", 800), ("y", 1280))
THUMB_BOXES: tuple[tuple[str, int], ...] = (("m", 320),)
# A profile photo: square, 160 px (what lists show) and 640 px (the profile), with the
# letters Telegram gives those sizes.
PROFILE_BOXES: tuple[tuple[str, int], ...] = (("a", 160), ("c", 640))
# Telegram's bounds for a photo: width + height, and the longer side over the shorter.
# They also cap the pixels a decode may allocate (at most 5000 x 5000) before any is.
MAX_SIDES_SUM = 10_000
MAX_ASPECT = 20
STRIPPED_BOX = 40
STRIPPED_QUALITY = 20
JPEG_QUALITY = 87
# Only the common still-image formats are decoded: every decoder is attack surface.
FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP")


@dataclass(frozen=True)
class Rendition:
    type: str
    w: int
    h: int
    jpeg: bytes


@dataclass(frozen=True)
class ProcessedImage:
    width: int  # of the original, after its EXIF orientation
    height: int
    sizes: list[Rendition]  # smallest first
    stripped: bytes


def check_dimensions(width: int, height: int) -> None:
    if width < 1 or height < 1 or width + height > MAX_SIDES_SUM:
        raise PhotoInvalidDimensions()
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise PhotoInvalidDimensions()


def process_image(
    data: bytes, boxes: tuple[tuple[str, int], ...] = PHOTO_BOXES, *, square: bool = False
) -> ProcessedImage:
    """Decode ``data`` and make its renditions; ImageProcessFailed for what is not an
    image, PhotoInvalidDimensions for what is too large or narrow (before decoding).
    ``square``: the renditions are of the image's centre square (profile photos)."""
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as opened:
            check_dimensions(*opened.size)
            largest = boxes[-1][1]
            # JPEG can decode at 1/2, 1/4, 1/8 scale (never below the size asked for).
            opened.draft("RGB", (largest, largest))
            image = ImageOps.exif_transpose(opened)
            image = _rgb(image)
            if square:
                image = _centre_square(image)
    except (PhotoInvalidDimensions, ImageProcessFailed):
        raise
    except Image.DecompressionBombError:
        # Pillow's own bound (far above ours) refused the size while reading the header.
        raise PhotoInvalidDimensions() from None
    except (OSError, SyntaxError, ValueError, EOFError):
        raise ImageProcessFailed() from None
    width, height = image.size
    sizes: list[Rendition] = []
    previous = 0
    for kind, box in boxes:
        if sizes and max(width, height) <= previous:
            break  # the last rendition already holds the whole image
        copy = image.copy()
        copy.thumbnail((box, box), Image.Resampling.LANCZOS, reducing_gap=3.0)
        sizes.append(Rendition(kind, copy.width, copy.height, _jpeg(copy, JPEG_QUALITY)))
        previous = box
    return ProcessedImage(width, height, sizes, stripped_preview(image))


def _centre_square(image: Image.Image) -> Image.Image:
    side = min(image.size)
    left = (image.width - side) // 2
    top = (image.height - side) // 2
    return image.crop((left, top, left + side, top + side))


def _rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        image.load()
        return image
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")


def _jpeg(image: Image.Image, quality: int) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


def stripped_preview(image: Image.Image) -> bytes:
    """``01 height width`` and the scan data of a tiny JPEG (photoStrippedSize)."""
    tiny = image.copy()
    tiny.thumbnail((STRIPPED_BOX, STRIPPED_BOX), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    tiny.save(out, "JPEG", quality=STRIPPED_QUALITY, subsampling=2, optimize=False)
    jpeg = out.getvalue()
    return bytes((1, tiny.height, tiny.width)) + _scan_data(jpeg)


def _scan_data(jpeg: bytes) -> bytes:
    """The entropy-coded data after the SOS segment, without the final EOI marker."""
    p = 2  # after SOI
    while p + 4 <= len(jpeg):
        if jpeg[p] != 0xFF:
            raise ValueError("not a JPEG segment")
        marker = jpeg[p + 1]
        length = int.from_bytes(jpeg[p + 2 : p + 4], "big")
        if marker == 0xDA:
            end = len(jpeg) - 2 if jpeg.endswith(b"\xff\xd9") else len(jpeg)
            return jpeg[p + 2 + length : end]
        p += 2 + length
    raise ValueError("JPEG without scan data")
