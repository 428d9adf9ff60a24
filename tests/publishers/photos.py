"""Photos as a phone makes them, for the image tests: real JPEG, PNG and WebP files made with
Pillow, with real EXIF (camera, time, orientation and a GPS position in its own IFD), XMP and
comments, and noise so that their size is what a camera's would be."""

from __future__ import annotations

import io
import os

from PIL import Image

GPS_IFD = 0x8825
ORIENTATION = 0x0112
# the Eiffel tower: 48° 51' 29.6" N, 2° 17' 40.2" E
GPS = {1: "N", 2: (48.0, 51.0, 29.6), 3: "E", 4: (2.0, 17.0, 40.2), 5: 0, 6: 35.0}
XMP = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
       b'<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="48,51.4933N"/></rdf:RDF></x:xmpmeta>')
CORNER = (255, 0, 0)  # the top-left pixels of a photo as its camera stored it


def exif(*, orientation: int = 1, gps: bool = True) -> Image.Exif:
    """A phone's EXIF: maker, model, time, orientation and (``gps``) the position."""
    tags = Image.Exif()
    tags[0x010F] = "PhoneMaker"
    tags[0x0110] = "Phone 15"
    tags[0x0132] = "2026:11:29 10:00:00"
    tags[ORIENTATION] = orientation
    if gps:
        ifd = tags.get_ifd(GPS_IFD)
        ifd.update(GPS)
    return tags


def picture(width: int, height: int, *, noise: bool = True, mode: str = "RGB") -> Image.Image:
    """An image of noise (or flat grey), with a red block in its top-left corner (to see where it goes)."""
    bands = len(mode)
    if noise:
        im = Image.frombytes(mode, (width, height), os.urandom(width * height * bands))
    else:
        im = Image.new(mode, (width, height), (128,) * bands)
    block = Image.new(mode, (max(1, width // 5), max(1, height // 5)), CORNER + (255,) * (bands - 3))
    im.paste(block, (0, 0))
    return im


def photo(width: int, height: int, *, orientation: int = 1, gps: bool = True, noise: bool = True, quality: int = 95,
          icc: bytes | None = None) -> bytes:
    """A JPEG as a phone writes it: EXIF with GPS, XMP with the position again, a comment."""
    out = io.BytesIO()
    extra = {"icc_profile": icc} if icc else {}
    picture(width, height, noise=noise).save(out, "JPEG", quality=quality, exif=exif(orientation=orientation, gps=gps),
                                             xmp=XMP, comment=b"taken at home", **extra)
    return out.getvalue()


def png_with(width: int, height: int, *, alpha: bool = False, noise: bool = True, orientation: int = 1) -> bytes:
    """A PNG with an eXIf chunk (GPS included) and text chunks; transparent right half when ``alpha``."""
    from PIL import PngImagePlugin

    im = picture(width, height, noise=noise, mode="RGBA" if alpha else "RGB")
    if alpha:
        clear = Image.new("RGBA", (width // 2, height), (0, 0, 0, 0))
        im.paste(clear, (width - width // 2, 0))
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "taken at home")
    info.add_text("XML:com.adobe.xmp", XMP.decode())
    out = io.BytesIO()
    im.save(out, "PNG", exif=exif(orientation=orientation), pnginfo=info)
    return out.getvalue()


def webp_with(width: int, height: int, *, noise: bool = True) -> bytes:
    """A lossy WebP with EXIF (GPS included) and XMP chunks."""
    out = io.BytesIO()
    picture(width, height, noise=noise).save(out, "WEBP", quality=95, exif=exif(), xmp=XMP)
    return out.getvalue()


def has_metadata(data: bytes) -> list[str]:
    """What in ``data`` would tell where, when or with what the photo was taken ([] when nothing)."""
    im = Image.open(io.BytesIO(data))
    found = []
    if len(im.getexif()):
        found.append(f"EXIF tags {sorted(im.getexif())}")
    if im.getexif().get_ifd(GPS_IFD):
        found.append("a GPS IFD")
    for key in ("exif", "xmp", "XML:com.adobe.xmp", "comment", "Comment", "photoshop"):
        if im.info.get(key):
            found.append(f"info[{key!r}]")
    for needle in (b"Exif\x00\x00", b"PhoneMaker", b"GPSLatitude", b"taken at home", b"http://ns.adobe.com/xap"):
        if needle in data:
            found.append(f"the bytes {needle!r}")
    return found
