"""The ctypes structs must match the C headers: each struct's C members (in
include/seedpipe/*.h, in order) must be a prefix of the ctypes fields (the
ctypes side may be longer: spare bytes for fields a newer library appends),
and the C compiler must put every member at the offset ctypes computes, with
a size no larger than the ctypes struct (a program compiled here against the
headers prints sizeof and offsetof; skipped visibly without a C compiler).
Catches a header change the bindings have not followed: a new member, a
wider type, a reordering."""
import ctypes
import json
import os
import re
import shutil
import subprocess

import pytest

from seedpipe import _lib as L

INCLUDE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "seedpipe")
STRUCTS = ["sp_error", "sp_digest", "sp_sample_list", "sp_loader_config", "sp_batch",
           "sp_loader_state",
           "sp_pool_config", "sp_pool_stats", "sp_client_info", "sp_failure",
           "sp_client_opts", "sp_stream_config", "sp_stream_info", "sp_cache_opts",
           "sp_cache_stats", "sp_verify_config", "sp_perm", "sp_batching", "sp_loader_info"]


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
        fn = re.match(r"[^(]*\(\s*\*\s*(\w+)\s*\)\s*\(", decl)   # a function pointer
        if fn:
            names.append(fn.group(1))
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


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """{struct: {"size": sizeof, "align": _Alignof, "off": {member: offsetof}}} from the C
    compiler, for every struct of STRUCTS."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which(cc):
        pytest.skip("no C compiler (cc) to print the headers' layout")
    d = tmp_path_factory.mktemp("abi")
    lines = ["#define SEEDPIPE_ADVANCED_API", "#include <stddef.h>", "#include <stdio.h>"]
    lines += ['#include "seedpipe/%s"' % f for f in sorted(os.listdir(INCLUDE)) if f.endswith(".h")]
    lines += ["int main(void) {", 'printf("{");']
    for i, name in enumerate(STRUCTS):
        lines.append('printf("%s\\"%s\\": {\\"size\\": %%zu, \\"align\\": %%zu, '
                     '\\"off\\": {", sizeof(%s), _Alignof(%s));' % ("," if i else "", name, name,
                                                                   name))
        for j, field in enumerate(header_fields(name) or []):
            lines.append('printf("%s\\"%s\\": %%zu", offsetof(%s, %s));'
                         % ("," if j else "", field, name, field))
        lines.append('printf("}}");')
    lines += ['printf("}\\n");', "return 0;", "}"]
    src, exe = d / "layout.c", d / "layout"
    src.write_text("\n".join(lines) + "\n")
    p = subprocess.run([cc, "-std=c11", "-I", os.path.join(INCLUDE, ".."), str(src), "-o",
                        str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(subprocess.run([str(exe)], capture_output=True, text=True,
                                     check=True).stdout)


@pytest.mark.skipif(not os.path.isdir(INCLUDE), reason="headers not available")
@pytest.mark.parametrize("name", STRUCTS)
def test_struct_layout_matches_compiler(name, c_layout):
    st = getattr(L, name)
    lay = c_layout[name]
    off = {f[0]: getattr(st, f[0]).offset for f in st._fields_}
    assert {k: off.get(k) for k in lay["off"]} == lay["off"], f"{name}: offsets differ"
    assert ctypes.sizeof(st) >= lay["size"], \
        f"{name}: ctypes {ctypes.sizeof(st)} bytes, C {lay['size']}"
    assert ctypes.alignment(st) == lay["align"], name


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
