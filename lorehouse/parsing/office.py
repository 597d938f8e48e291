"""Checks shared by the Office Open XML parsers before a library opens the package."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

from lorehouse.errors import ParseError
from lorehouse.models import FailureReason
from lorehouse.sniffing import OLE_MAGIC, ZIP_MAGIC

# Office packages compress XML about 10:1; a ratio far above that is a decompression bomb.
_MAX_COMPRESSION_RATIO = 150
_MAX_UNCOMPRESSED_BYTES = 1024 * 1024 * 1024
_ENCRYPTION_STREAM = "EncryptionInfo".encode("utf-16-le")


def check_office_package(data: bytes, kind: str) -> None:
    """Rejects, with a countable reason, what python-docx/pptx and openpyxl would choke on.

    Password-protected Office files are OLE2 containers holding an encrypted package, not ZIPs;
    old binary .doc/.xls/.ppt files are OLE2 too but without the encryption stream.
    """
    if not data:
        raise ParseError(FailureReason.EMPTY, f"the {kind} file has no bytes")
    if data.startswith(OLE_MAGIC):
        if _ENCRYPTION_STREAM in data:
            raise ParseError(FailureReason.ENCRYPTED, f"the {kind} file is password-protected")
        raise ParseError(
            FailureReason.UNSUPPORTED_TYPE,
            f"an OLE2 (legacy binary Office) file named like a {kind}; save it as .{kind}",
        )
    if not data.startswith(ZIP_MAGIC):
        raise ParseError(FailureReason.CORRUPT, f"not a {kind} package (no ZIP signature)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        raise ParseError(FailureReason.CORRUPT, f"broken {kind} package: {error}") from error
    unpacked = sum(info.file_size for info in infos)
    packed = sum(info.compress_size for info in infos) or 1
    if unpacked > _MAX_UNCOMPRESSED_BYTES or unpacked / packed > _MAX_COMPRESSION_RATIO:
        raise ParseError(
            FailureReason.CORRUPT,
            f"{kind} package would unpack to {unpacked:,} bytes from {packed:,}: "
            "refused as a decompression bomb",
        )
    for info in infos:
        if info.compress_type == zipfile.ZIP_DEFLATED and not _inflates_as_declared(data, info):
            raise ParseError(
                FailureReason.CORRUPT,
                f"{kind} package member {info.filename} inflates past the {info.file_size:,} "
                "bytes its header declares: refused as a decompression bomb",
            )


def _inflates_as_declared(data: bytes, info: zipfile.ZipInfo) -> bool:
    """Inflates one member a megabyte at a time and stops once it passes its declared size.

    zipfile trusts the header: asked for a member, it inflates everything that was stored
    in one go and only then cuts it to the declared size, so a header that lies lets a
    small file allocate gigabytes inside the Office libraries.
    """
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    pending = data[start : start + info.compress_size]
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    inflated = 0
    try:
        while pending and not inflater.eof:
            inflated += len(inflater.decompress(pending, 1024 * 1024))
            if inflated > info.file_size:
                return False
            pending = inflater.unconsumed_tail
    except zlib.error:
        return True  # damaged rather than oversized: the library reports it as corrupt
    return True
