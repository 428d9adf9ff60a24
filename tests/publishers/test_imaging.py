"""publishers/imaging.py on real files made with Pillow: a photo over Bluesky's limit is scaled
under it with its aspect ratio, quality stepped down before size; EXIF, GPS, XMP and comments
are gone from every kind of image; the EXIF orientation is in the pixels; transparency is kept;
an animated GIF is its first frame, said; bombs and junk are one sentence."""

from __future__ import annotations

import io
import zlib

import pytest
from PIL import Image, ImageCms

from publishers.errors import ContentProblem
from publishers.imaging import MAX_PIXELS, prepare, thumbnail
from publishers.thumbnails import RETRY_MS, Cache, Thumb, fallback
from tests.publishers.photos import has_metadata, photo, png_with, webp_with

LIMIT = 1_000_000


def opened(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def reference(src: bytes, quality: int) -> bytes:
    """The source's pixels encoded as imaging encodes them at ``quality``."""
    out = io.BytesIO()
    opened(src).convert("RGB").save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


def test_a_6_mb_photo_is_scaled_under_the_limit_with_its_ratio_and_without_metadata():
    src = photo(2800, 1900)
    assert len(src) > 5_500_000 and "a GPS IFD" in has_metadata(src)
    out = prepare(src, what="image 1 (beach.jpg)", limit=LIMIT)
    assert len(out.data) <= LIMIT
    im = opened(out.data)
    assert im.format == "JPEG" and im.size == (out.width, out.height) and out.mime == "image/jpeg"
    assert out.width < 2800 and out.height == round(out.width * 1900 / 2800)  # the ratio, to the pixel
    assert has_metadata(out.data) == []
    assert out.notes == (f"image 1 (beach.jpg) was scaled from 2,800 x 1,900 to {out.width:,} x {out.height:,} pixels "
                         "to fit in 1,000,000 bytes",)


def test_quality_is_stepped_down_before_the_size():
    src = photo(1200, 900)
    q90, q80, q70 = (reference(src, q) for q in (90, 80, 70))
    assert len(q90) > len(q80) > len(q70)
    # room for quality 80 but not 90: the size is kept, the quality is 80's
    out = prepare(src, what="image 1", limit=(len(q80) + len(q90)) // 2)
    assert (out.width, out.height) == (1200, 900) and opened(out.data).quantization == opened(q80).quantization
    # not even room for quality 70 at this size: only now smaller, and at quality 70
    out = prepare(src, what="image 1", limit=len(q70) - 50_000)
    assert out.width < 1200 and len(out.data) <= len(q70) - 50_000
    assert opened(out.data).quantization == opened(q70).quantization


def test_an_image_under_the_limit_keeps_its_size_and_its_own_quality():
    src = photo(800, 600, quality=85)
    out = prepare(src, what="image 1", limit=LIMIT)
    assert (out.width, out.height) == (800, 600) and out.notes == ()
    assert opened(out.data).quantization == opened(src).quantization
    assert has_metadata(src) and has_metadata(out.data) == []


@pytest.mark.parametrize("limit", [120_000, 400_000, 1_000_000])
def test_the_bytes_are_under_every_limit(limit):
    out = prepare(photo(1600, 1200), what="image 1", limit=limit)
    assert len(out.data) <= limit and out.height == round(out.width * 1200 / 1600)


@pytest.mark.parametrize("make", [lambda: photo(640, 480), lambda: png_with(320, 240), lambda: webp_with(320, 240)],
                         ids=["jpeg", "png", "webp"])
@pytest.mark.parametrize("limit", [None, LIMIT], ids=["stored", "uploaded"])
def test_exif_gps_xmp_and_comments_are_removed_from_every_kind(make, limit):
    src = make()
    assert "a GPS IFD" in has_metadata(src)
    out = prepare(src, what="image 1", limit=limit)
    assert has_metadata(out.data) == []
    assert opened(out.data).size == opened(src).size


def test_the_colour_profile_is_kept():
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    out = prepare(photo(320, 240, icc=icc), what="image 1", limit=LIMIT)
    assert opened(out.data).info.get("icc_profile") == icc and has_metadata(out.data) == []


# where the camera's top-left corner is once the photo is turned upright, for each EXIF orientation
@pytest.mark.parametrize("orientation,size,corner", [
    (1, (300, 200), (5, 5)), (3, (300, 200), (294, 194)), (6, (200, 300), (194, 5)), (8, (200, 300), (5, 294)),
])
@pytest.mark.parametrize("limit", [None, LIMIT], ids=["stored", "uploaded"])
def test_the_exif_orientation_is_applied_to_the_pixels_before_the_tag_is_dropped(orientation, size, corner, limit):
    src = photo(300, 200, orientation=orientation, noise=False)
    out = prepare(src, what="image 1", limit=limit)
    im = opened(out.data).convert("RGB")
    assert im.size == size == (out.width, out.height)
    r, g, b = im.getpixel(corner)
    assert r > 200 and g < 60 and b < 60, (orientation, im.getpixel(corner))
    assert im.getexif().get(0x0112) is None


def test_a_transparent_png_stays_transparent_with_fewer_colours_then_smaller():
    src = png_with(1400, 1400, alpha=True)
    assert len(src) > 3 * LIMIT
    out = prepare(src, what="image 2 (logo.png)", limit=LIMIT)
    im = opened(out.data)
    assert out.mime == "image/png" and im.format == "PNG" and len(out.data) <= LIMIT
    alpha = im.convert("RGBA").getchannel("A")
    assert alpha.getpixel((out.width - 1, 0)) == 0 and alpha.getpixel((0, 0)) > 240  # the clear half is still clear
    assert out.notes[0] == "image 2 (logo.png) keeps its transparency with 256 colours to fit in 1,000,000 bytes"
    assert has_metadata(out.data) == []


def test_an_opaque_png_over_the_limit_is_published_as_a_jpeg():
    out = prepare(png_with(1200, 1000), what="image 1 (shot.png)", limit=LIMIT)
    assert out.mime == "image/jpeg" and len(out.data) <= LIMIT
    assert "image 1 (shot.png) has no transparency and is published as a JPEG to fit in 1,000,000 bytes" in out.notes


def test_a_small_png_stays_a_lossless_png():
    src = png_with(64, 48, noise=True)
    out = prepare(src, what="image 1", limit=LIMIT)
    assert out.mime == "image/png" and opened(out.data).convert("RGB").tobytes() == opened(src).convert("RGB").tobytes()


def test_an_animated_gif_is_published_as_its_first_frame_and_says_so():
    frames = [Image.new("RGB", (120, 80), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0, comment=b"taken at home")
    got = prepare(out.getvalue(), what="image 1 (party.gif)", limit=LIMIT)
    im = opened(got.data)
    assert got.mime == "image/png" and im.size == (120, 80) and not getattr(im, "is_animated", False)
    assert im.convert("RGB").getpixel((60, 40)) == (255, 0, 0)
    assert got.notes == ("image 1 (party.gif) is animated: Bluesky shows images as stills, so its first frame is published",)
    assert b"taken at home" not in got.data


def _png(width: int, height: int, raw: bytes, colour_type: int = 0) -> bytes:
    import struct

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def test_a_decompression_bomb_is_refused_before_its_pixels_are_decoded():
    side = 7200  # 51.8 megapixels of grey in 50 KB
    bomb = _png(side, side, b"\x00" * ((side + 1) * side))
    assert len(bomb) < 100_000 and side * side > MAX_PIXELS
    for limit in (None, LIMIT):
        with pytest.raises(ContentProblem) as refused:
            prepare(bomb, what="image 1 (small.png)", limit=limit)
        assert refused.value.reason == ("image 1 (small.png) has more than 50,000,000 pixels (50 megapixels), the most the hub "
                                        "reads: give a smaller image") and refused.value.permanent
    with pytest.raises(ContentProblem, match="more than 50,000,000 pixels"):
        prepare(_png(30_000, 30_000, b""), what="image 1", limit=LIMIT)  # the header alone says too much
    with pytest.raises(ContentProblem, match="more than 50,000,000 pixels"):
        thumbnail(bomb, what="image 1", px=96)


JUNK = {
    "png-header-then-junk": b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"junk" * 50,
    "half-a-jpeg": photo(200, 150)[:4000],
    "jpeg-marker-then-noise": b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4,
    "gif-header-only": b"GIF89a" + b"\x10\x00\x10\x00",
    "half-a-png": png_with(100, 100)[:15_000],
    "text": b"<html>I am an image, honest</html>",
}


@pytest.mark.parametrize("data", JUNK.values(), ids=JUNK.keys())
def test_junk_is_one_sentence(data):
    with pytest.raises(ContentProblem) as refused:
        prepare(data, what="image 1 (x.png)", limit=LIMIT)
    reason = refused.value.reason
    assert reason.startswith("image 1 (x.png) ") and "\n" not in reason and refused.value.permanent
    assert "cannot be read as an image" in reason or "is not a JPEG, PNG, GIF or WebP image" in reason


def test_a_thumbnail_is_small_upright_and_without_metadata():
    src = photo(1200, 800, orientation=6, noise=False)
    data, mime = thumbnail(src, what="image 1", px=96)
    im = opened(data)
    assert mime == "image/jpeg" and im.size == (96, 96) and has_metadata(data) == []
    whole, _ = thumbnail(src, what="image 1", px=96, crop=False)
    assert opened(whole).size == (64, 96)  # portrait once upright, the ratio kept within the box
    r, g, b = opened(whole).convert("RGB").getpixel((60, 2))  # the camera's top-left corner is now top-right
    assert r > 200 and g < 80 and b < 80
    clear, mime = thumbnail(png_with(200, 200, alpha=True), what="image 2", px=96)
    assert mime == "image/png" and opened(clear).convert("RGBA").getchannel("A").getextrema()[0] == 0


# ---- the thumbnails' cache ------------------------------------------------------------------
def thumb(size: int, made_at: int = 0) -> Thumb:
    return Thumb(b"x" * size, "image/jpeg", made_at=made_at)


def test_the_cache_keeps_at_most_its_bytes_the_least_recently_shown_going_first():
    cache = Cache(1000)
    for key in range(3):
        cache.put(key, thumb(300))
    assert cache.get(0, 0) is not None  # shown again: now the most recent
    cache.put(3, thumb(300))
    assert cache.bytes == 900 and len(cache) == 3
    assert cache.get(1, 0) is None and all(cache.get(k, 0) is not None for k in (0, 2, 3))
    cache.put(4, thumb(2000))  # larger than the whole cache: not kept, nothing pushed out
    assert cache.get(4, 0) is None and len(cache) == 3
    small = Cache(10_000, max_entries=2)
    for key in range(3):
        small.put(key, thumb(1))
    assert len(small) == 2 and small.get(0, 0) is None


def test_a_failure_is_remembered_for_a_while_then_tried_again():
    cache = Cache(10_000)
    cache.put("broken", fallback(96, "image 1 (https://cdn.example.org/x.jpg) could not be fetched", 1_000))
    assert cache.get("broken", 1_000 + RETRY_MS - 1) is not None
    assert cache.get("broken", 1_000 + RETRY_MS) is None and len(cache) == 0
    cache.put("fine", thumb(10, made_at=1_000))
    assert cache.get("fine", 1_000 + 10 * RETRY_MS) is not None  # a thumbnail that was made stays
