"""Images made fit to publish: read safely, turned upright, stripped of what they say about the
person, and made small enough for the platform. The one module that touches Pillow, which it
imports the first time an image is processed (``skyhub --help`` and a hub that publishes only
text never load it).

**Reading** (``_open``): only JPEG, PNG, GIF and WebP, at most ``MAX_PIXELS`` pixels (Pillow's
``MAX_IMAGE_PIXELS`` is set to it and its decompression-bomb warning is an error here, so a
30,000 x 30,000 PNG of a few kilobytes is refused before any pixel is decoded; the bytes are
capped before that, ``media.MAX_BYTES``). Bytes that are not a whole image, a truncated file
or a bomb are a ``ContentProblem`` in one sentence naming the image.

**What is kept**: the pixels, turned by the EXIF orientation first (a phone photo taken
sideways is published upright), the colour profile (ICC: a phone's Display P3 photo keeps its
colours; it says nothing about the person) and the transparency. **What is dropped**: every
other metadata block (EXIF with its GPS position, camera and time; XMP; IPTC; comments; PNG text
chunks), because the output is encoded from the pixels alone, never copied from the input.

**Fitting** (``prepare`` with a ``limit``), quality before size:

    JPEG                the original's quantisation tables (its own quality) when it is
                        already under the limit; then quality 90, 80, 70; then the dimensions,
                        at quality 70
    WebP                lossless when it was lossless, then quality 90, 80, 70; then the
                        dimensions, at quality 70
    PNG, opaque         lossless PNG; over the limit, a JPEG (a photo saved as PNG), as above
    PNG, transparent    lossless PNG; then 256 colours with their transparency (still a PNG:
                        transparency is never flattened); then the dimensions
    GIF                 its frame as a lossless PNG (the same pixels, usually fewer bytes), then
                        as a PNG above; an animated GIF (or WebP) gives its first frame, because
                        Bluesky shows images as stills, and the post says so (``notes``)

Each step down in size scales both sides by the same factor (estimated from how far over the
limit the last try was, at most 0.9), so the aspect ratio is kept to the pixel, and the final
bytes are checked against the limit: nothing over it is ever returned.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ContentProblem

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_PIXELS = 50_000_000  # a 48-megapixel phone photo (8064 x 6048) passes; decoding one takes ~150 MB
QUALITIES = (90, 80, 70)
MIN_SIDE = 16  # no image is made smaller than this on its shorter side: the limit cannot be met
KINDS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp"}
MIME = {"jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}


@dataclass(frozen=True)
class Picture:
    """An image as it is published: its bytes, MIME type, size in pixels and what was done to it
    that a person would want to know (``notes``: scaled, a still of an animation, a JPEG now)."""

    data: bytes = field(repr=False)
    mime: str
    width: int
    height: int
    notes: tuple[str, ...] = ()


def _pil() -> Any:
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # the decompression-bomb fence: see the module docstring
    return Image


def _open(data: bytes, what: str, *, draft: tuple[int, int] | None = None) -> tuple[Image, str, bool]:
    """The first frame of the image in ``data``, decoded and upright; its kind and whether it was animated."""
    Image = _pil()
    from PIL import UnidentifiedImageError

    unreadable = f"{what} cannot be read as an image (a damaged or unfinished file?): give another JPEG, PNG, GIF or WebP file"
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data), formats=("JPEG", "PNG", "GIF", "WEBP"))
            kind = KINDS.get(str(im.format))
            if kind is None:  # pragma: no cover - Pillow opens only the formats asked for
                raise ContentProblem(f"{what} is not a JPEG, PNG, GIF or WebP image", permanent=True)
            width, height = im.size
            if width * height > MAX_PIXELS:
                raise Image.DecompressionBombError("too many pixels")
            animated = kind in ("gif", "webp") and bool(getattr(im, "is_animated", False))
            if animated:
                im.seek(0)
            if draft is not None and kind == "jpeg":
                im.draft("RGB", draft)  # a thumbnail: decode at 1/2, 1/4 or 1/8 scale, far less memory
            im.load()
        except (Image.DecompressionBombWarning, Image.DecompressionBombError):
            raise ContentProblem(f"{what} has more than {MAX_PIXELS:,} pixels (50 megapixels), the most the hub reads: "
                                 "give a smaller image", permanent=True) from None
        except ContentProblem:
            raise
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError, TypeError):
            # what Pillow raises for bytes that are not what their header says (truncated, corrupt, not an image)
            raise ContentProblem(unreadable, permanent=True) from None
    return _upright(im), kind, animated


def _upright(im: Image) -> Image:
    """``im`` turned as its EXIF orientation says, with every metadata block dropped but the colour
    profile and the transparency (what encoding needs)."""
    from PIL import ImageOps

    try:
        turned = ImageOps.exif_transpose(im)
    except Exception:  # noqa: BLE001 - EXIF is the client's bytes: a malformed block only loses the orientation
        turned = im.copy()
    if turned is None:  # pragma: no cover - exif_transpose returns None only in place
        turned = im
    turned.info = {k: v for k, v in im.info.items() if k in ("icc_profile", "transparency")}
    return turned


def _has_alpha(im: Image) -> bool:
    """Whether some pixel of ``im`` is not fully opaque (an alpha channel of 255 everywhere is opaque)."""
    if im.mode in ("RGBA", "LA", "PA", "RGBa") or (im.mode == "P" and "transparency" in im.info):
        low = im.convert("RGBA").getchannel("A").getextrema()[0]
        return isinstance(low, int | float) and low < 255
    return False


def _ready(im: Image, kind: str, alpha: bool) -> Image:
    """``im`` in a mode ``kind`` encodes: JPEG is RGB or L (transparency flattened onto white),
    WebP RGB or RGBA, PNG any 8-bit mode."""
    if kind == "jpeg":
        if im.mode in ("RGB", "L"):
            return im
        if alpha:
            rgba = im.convert("RGBA")
            flat = _pil().new("RGB", rgba.size, (255, 255, 255))
            flat.paste(rgba, mask=rgba.getchannel("A"))
            return _keep_info(flat, im)
        out = im.convert("RGB")
    elif kind == "webp":
        if im.mode in ("RGB", "RGBA"):
            return im
        out = im.convert("RGBA" if alpha else "RGB")
    else:
        if im.mode in ("1", "L", "LA", "P", "RGB", "RGBA"):
            return im
        out = im.convert("RGBA" if alpha else "RGB")
    out.info = {k: v for k, v in im.info.items() if k == "icc_profile"}
    return out


def _encode(im: Image, kind: str, *, quality: int | None = None, tables: Any = None, sampling: int = -1,
            lossless: bool = False, colours: bool = False) -> bytes:
    """``im`` encoded as ``kind`` from its pixels, its colour profile and transparency only."""
    out = io.BytesIO()
    extra: dict[str, Any] = {}
    if im.info.get("icc_profile"):
        extra["icc_profile"] = im.info["icc_profile"]
    if kind == "jpeg":
        if tables is not None:
            extra.update(qtables=tables, subsampling=sampling)
        else:
            extra["quality"] = quality or QUALITIES[0]
        im.save(out, "JPEG", optimize=True, **extra)
    elif kind == "webp":
        im.save(out, "WEBP", lossless=lossless, quality=100 if lossless else (quality or QUALITIES[0]), method=4, **extra)
    else:
        if colours and im.mode != "P":  # 256 colours, the transparency with them: PNG's "quality" step
            im = im.convert("RGBA").quantize(256, method=_pil().Quantize.FASTOCTREE)
        elif "transparency" in im.info:
            extra["transparency"] = im.info["transparency"]
        im.save(out, "PNG", optimize=True, **extra)
    return out.getvalue()


Step = tuple[str, "Image", dict[str, Any]]


def _ladder(im: Image, kind: str, data: bytes, alpha: bool, limit: int | None) -> list[Step]:
    """What is tried before any change of size, in order: (output kind, image, encoding options).
    Without a limit, only the first (the image as it came, re-encoded at its own quality)."""
    steps: list[Step] = []
    if kind == "jpeg":
        rgb = _ready(im, "jpeg", alpha)
        tables = _tables(data)
        if tables is not None and (limit is None or len(data) <= limit):
            steps.append(("jpeg", rgb, {"tables": tables[0], "sampling": tables[1]}))
        steps += [("jpeg", rgb, {"quality": q}) for q in QUALITIES]
    elif kind == "webp":
        ready = _ready(im, "webp", alpha)
        if _webp_lossless(data):
            steps.append(("webp", ready, {"lossless": True}))
        steps += [("webp", ready, {"quality": q}) for q in QUALITIES]
    else:  # PNG, and a GIF's (first) frame, published as a PNG: the same pixels, usually fewer bytes
        ready = _ready(im, "png", alpha)
        steps.append(("png", ready, {}))
        if alpha:
            steps.append(("png", ready, {"colours": True}))
        else:
            rgb = _ready(im, "jpeg", alpha)
            steps += [("jpeg", rgb, {"quality": q}) for q in QUALITIES]
    return steps if limit is not None else steps[:1]


def _scaled(im: Image, factor: float) -> Image:
    """``im`` with both sides times ``factor``; the height follows from the width, so the ratio is kept."""
    Image = _pil()
    if im.mode in ("P", "1"):
        im = _keep_info(im.convert("RGBA" if "transparency" in im.info else "RGB"), im)
    width, height = im.size
    new_w = max(1, round(width * factor))
    new_h = max(1, round(new_w * height / width))
    return _keep_info(im.resize((new_w, new_h), Image.Resampling.LANCZOS), im)


def _keep_info(new: Image, old: Image) -> Image:
    new.info = {k: v for k, v in old.info.items() if k == "icc_profile"}
    return new


def _webp_lossless(data: bytes) -> bool:
    """Whether a WebP file's image is lossless (a VP8L chunk rather than VP8)."""
    head = data[12:4096]
    return b"VP8L" in head and b"VP8 " not in head


def _tables(data: bytes) -> tuple[dict[int, Any], int] | None:
    """A JPEG's own quantisation tables and chroma subsampling, to re-encode it at its own quality."""
    from PIL import Image as _Image
    from PIL import JpegImagePlugin

    try:
        source = _Image.open(io.BytesIO(data), formats=("JPEG",))
        tables = getattr(source, "quantization", None)
        sampling = JpegImagePlugin.get_sampling(source)
    except Exception:  # noqa: BLE001 - the image was read already; without its tables it is encoded at quality 90
        return None
    if not tables or sampling < 0:
        return None
    return dict(tables), sampling


def prepare(data: bytes, *, what: str, limit: int | None = None) -> Picture:
    """``data`` upright and without metadata (see the module docstring); with ``limit``, at most
    that many bytes, quality stepped down before size. ``what`` names the image in sentences
    ("image 1 (beach.jpg)"). Raises ``ContentProblem`` for bytes that are no image, a bomb, or an
    image that cannot be brought under ``limit``."""
    im, kind, animated = _open(data, what)
    width, height = im.size
    alpha = _has_alpha(im)
    options: dict[str, Any] = {}
    encoded, final, out_kind = b"", im, kind
    for out_kind, final, options in _ladder(im, kind, data, alpha, limit):
        encoded = _encode(final, out_kind, **options)
        if limit is None or len(encoded) <= limit:
            break
    if out_kind in ("jpeg", "webp"):
        options = {"quality": QUALITIES[-1]}  # the lowest quality of the ladder, from now on at smaller sizes
    while limit is not None and len(encoded) > limit:  # the quality steps are done: now the size
        final = _scaled(final, min(0.9, math.sqrt(limit / len(encoded)) * 0.95))
        if min(final.size) < MIN_SIDE:
            raise ContentProblem(f"{what} cannot be made smaller than {limit:,} bytes: give a smaller image", permanent=True)
        encoded = _encode(final, out_kind, **options)
    if limit is not None and len(encoded) > limit:  # pragma: no cover - the loop ends only under the limit
        raise ContentProblem(f"{what} cannot be made smaller than {limit:,} bytes: give a smaller image", permanent=True)
    notes = []
    if animated:
        notes.append(f"{what} is animated: Bluesky shows images as stills, so its first frame is published")
    if out_kind == "jpeg" and kind != "jpeg":
        notes.append(f"{what} has no transparency and is published as a JPEG to fit in {limit:,} bytes")
    elif options.get("colours"):
        notes.append(f"{what} keeps its transparency with 256 colours to fit in {limit:,} bytes")
    if final.size != (width, height):
        notes.append(f"{what} was scaled from {width:,} x {height:,} to {final.width:,} x {final.height:,} pixels "
                     f"to fit in {limit:,} bytes")
    return Picture(encoded, MIME[out_kind], final.width, final.height, tuple(notes))


def thumbnail(data: bytes, *, what: str, px: int, crop: bool = True) -> tuple[bytes, str]:
    """A small image of ``data`` within ``px`` x ``px`` (``crop``: exactly that square, its centre),
    upright and without metadata: a JPEG, or a PNG when it is transparent. (bytes, MIME type)."""
    Image = _pil()
    from PIL import ImageOps

    im, _kind, _animated = _open(data, what, draft=(px * 2, px * 2))
    alpha = _has_alpha(im)
    im = im.convert("RGBA" if alpha else "RGB")
    if crop:
        small = ImageOps.fit(im, (px, px), Image.Resampling.LANCZOS)
    else:
        small = im.copy()
        small.thumbnail((px, px), Image.Resampling.LANCZOS)
    small.info = {}
    out = io.BytesIO()
    if alpha:
        small.save(out, "PNG", optimize=True)
        return out.getvalue(), "image/png"
    small.save(out, "JPEG", quality=80, optimize=True)
    return out.getvalue(), "image/jpeg"


__all__ = ["MAX_PIXELS", "Picture", "prepare", "thumbnail"]
