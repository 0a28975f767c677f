"""core/files.py: the one checked reader for every path the user controls (issue 15, section 2)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from apextui.core import files
from apextui.core.files import UnreadableFile, read_text

LIMIT = 100


def rejected(path: Path | str, limit: int = LIMIT) -> UnreadableFile:
    with pytest.raises(UnreadableFile) as info:
        read_text(path, limit, "test file")
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    return info.value


def test_a_regular_file_is_read_as_utf8_with_or_without_a_bom(tmp_path: Path):
    plain, bom = tmp_path / "plain", tmp_path / "bom"
    plain.write_text("héllo", encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + "héllo".encode())
    assert read_text(plain, LIMIT, "test file") == read_text(bom, LIMIT, "test file") == "héllo"


def test_exactly_the_limit_is_allowed_one_byte_more_is_not(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * LIMIT)
    assert len(read_text(path, LIMIT, "test file")) == LIMIT
    path.write_bytes(b"x" * (LIMIT + 1))
    assert "too large for a test file (101 bytes; at most 100 bytes allowed)" in str(rejected(path))


def test_a_sparse_file_over_the_limit_is_refused_before_reading(tmp_path: Path):
    path = tmp_path / "huge"
    with path.open("wb") as f:
        f.truncate(files.DATA_LIMIT * 16)  # 1 GiB that takes no disk and is never read
    assert f"at most {files.DATA_LIMIT} bytes allowed" in str(rejected(path, files.DATA_LIMIT))


def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    path = tmp_path / "f.toml"
    os.mkfifo(path)  # no writer: an ordinary open() would block forever
    assert "not a regular file (a FIFO); a test file must be a regular file" in str(rejected(path))


def test_a_socket_a_device_and_a_directory_are_refused(tmp_path: Path):
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert "not a regular file (a socket)" in str(rejected(sock_path))
    assert "not a regular file (a character device)" in str(rejected(os.devnull))
    assert "is a directory, not a test file" in str(rejected(tmp_path))


def test_missing_unreadable_and_undecodable_files(tmp_path: Path):
    missing = rejected(tmp_path / "nope")
    assert "no such test file" in str(missing) and missing.missing
    assert "cannot read: embedded null byte" in str(rejected("a\x00b"))
    assert not rejected("a\x00b").missing
    bad = tmp_path / "latin1"
    bad.write_bytes("é".encode("latin-1"))
    assert "not UTF-8 text (byte 0); a test file is UTF-8 text" in str(rejected(bad))
    assert "cannot read: Not a directory" in str(rejected(bad / "below"))


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path):
    (tmp_path / "real").write_text("ok")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_text(tmp_path / "link", LIMIT, "test file") == "ok"


def test_the_reader_error_is_a_value_error():  # callers that catch ValueError keep working
    assert issubclass(UnreadableFile, ValueError)
