"""The ctypes structs must match the C headers: each struct's C members (in
include/seedpipe/*.h, in order) must be a prefix of the ctypes fields (the
ctypes side may be longer: spare bytes for fields a newer library appends).
Catches a header change the bindings have not followed."""
import os
import re

import pytest

from seedpipe import _lib as L

INCLUDE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "seedpipe")
STRUCTS = ["sp_error", "sp_digest", "sp_sample_list", "sp_loader_config", "sp_batch",
           "sp_loader_state",
           "sp_pool_config", "sp_pool_stats", "sp_client_info", "sp_failure",
           "sp_client_opts", "sp_stream_config", "sp_stream_info"]


def header_fields(name):
    text = ""
    for f in sorted(os.listdir(INCLUDE)):
        if f.endswith(".h"):
            with open(os.path.join(INCLUDE, f)) as fh:
                text += fh.read() + "\n"
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, flags=re.S)
    if not m:
        return None
    names = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        for part in decl.split(","):
            part = re.sub(r"\[.*?\]", "", part).strip()
            names.append(re.split(r"[\s*]+", part)[-1])
    return names


@pytest.mark.skipif(not os.path.isdir(INCLUDE), reason="headers not available")
@pytest.mark.parametrize("name", STRUCTS)
def test_struct_matches_header(name):
    c = header_fields(name)
    assert c is not None, f"{name} not found in the headers"
    py = [f[0] for f in getattr(L, name)._fields_]
    assert py[:len(c)] == c, f"{name}: header {c}, ctypes {py}"


def test_abi_version_matches_header():
    """The ctypes declarations' ABI_VERSION is the header's SP_ABI_VERSION,
    and the loaded library reports it."""
    with open(os.path.join(INCLUDE, "version.h")) as f:
        m = re.search(r"^#define SP_ABI_VERSION (\d+)", f.read(), flags=re.M)
    assert m, "SP_ABI_VERSION not found in version.h"
    assert L.ABI_VERSION == int(m.group(1))
    assert L.sp_abi_version() == L.ABI_VERSION


def test_abi_mismatch_is_a_clear_import_error():
    class Other:   # a library of another ABI version
        @staticmethod
        def sp_abi_version():
            return L.ABI_VERSION + 1

    with pytest.raises(ImportError, match=r"/x/libseedpipe\.so is ABI %d.*needs libseedpipe ABI "
                       r"%d.*SEEDPIPE_LIB" % (L.ABI_VERSION + 1, L.ABI_VERSION)):
        L.check_abi(Other(), "/x/libseedpipe.so")

    class Old:     # a library from before sp_abi_version()
        pass

    with pytest.raises(ImportError, match="older one"):
        L.check_abi(Old(), "/y/libseedpipe.so")


def test_version_is_the_headers():
    import seedpipe
    with open(os.path.join(INCLUDE, "version.h")) as f:
        text = f.read()
    v = [re.search(r"^#define SP_VERSION_%s (\d+)" % k, text, flags=re.M).group(1)
         for k in ("MAJOR", "MINOR", "PATCH")]
    assert seedpipe.__version__ == ".".join(v)
    assert seedpipe.version() == "seedpipe " + ".".join(v)
