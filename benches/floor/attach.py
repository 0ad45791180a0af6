#!/usr/bin/env python3
"""Load a BPF object with the system libbpf (libbpf1), attach every program, and (when it
has a ring buffer map `rb`) drain it every 20 ms, until SIGTERM or SIGINT. Writes READY
once attached; at exit prints `consumed N dropped N` (`dropped` is the object's global of
that name, when it has one). Used by benches/suite.sh for its floor-* configs.

usage: attach.py OBJ.o READY_FILE (benches/suite.sh runs it for the floor-* configs)"""
import ctypes
import signal
import sys
import time

lib = ctypes.CDLL("libbpf.so.1")
P = ctypes.c_void_p
for name, res, args in [
    ("bpf_object__open_file", P, [ctypes.c_char_p, P]),
    ("bpf_object__load", ctypes.c_int, [P]),
    ("bpf_object__next_program", P, [P, P]),
    ("bpf_object__next_map", P, [P, P]),
    ("bpf_program__attach", P, [P]),
    ("bpf_map__name", ctypes.c_char_p, [P]),
    ("bpf_map__fd", ctypes.c_int, [P]),
    ("bpf_map_lookup_elem", ctypes.c_int, [ctypes.c_int, P, P]),
    ("libbpf_get_error", ctypes.c_long, [P]),
    ("ring_buffer__new", P, [ctypes.c_int, P, P, P]),
    ("ring_buffer__consume", ctypes.c_int, [P]),
]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args

obj = lib.bpf_object__open_file(sys.argv[1].encode(), None)
if not obj or lib.libbpf_get_error(obj):
    sys.exit(f"attach.py: cannot open {sys.argv[1]}")
if lib.bpf_object__load(obj):
    sys.exit("attach.py: load failed (root? BTF?)")
links, maps = [], {}
p = lib.bpf_object__next_program(obj, None)
while p:
    link = lib.bpf_program__attach(p)
    if not link or lib.libbpf_get_error(link):
        sys.exit("attach.py: attach failed")
    links.append(link)
    p = lib.bpf_object__next_program(obj, p)
m = lib.bpf_object__next_map(obj, None)
while m:
    maps[lib.bpf_map__name(m).decode()] = m
    m = lib.bpf_object__next_map(obj, m)

consumed = 0
CB = ctypes.CFUNCTYPE(ctypes.c_int, P, P, ctypes.c_size_t)


def on_record(_ctx, _data, _size):
    global consumed
    consumed += 1
    return 0


callback = CB(on_record)
rb = None
if "rb" in maps:
    rb = lib.ring_buffer__new(lib.bpf_map__fd(maps["rb"]), ctypes.cast(callback, P), None, None)
stop = False


def on_stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_stop)
signal.signal(signal.SIGINT, on_stop)
with open(sys.argv[2], "w") as f:
    f.write(f"{len(links)} programs attached\n")
while not stop:
    if rb:
        lib.ring_buffer__consume(rb)
    time.sleep(0.02)
if rb:
    lib.ring_buffer__consume(rb)
dropped = 0
bss = next((m for n, m in maps.items() if n.endswith(".bss")), None)
if bss:
    key, val = ctypes.c_uint32(0), ctypes.c_uint64(0)
    lib.bpf_map_lookup_elem(lib.bpf_map__fd(bss), ctypes.byref(key), ctypes.byref(val))
    dropped = val.value
print(f"consumed {consumed} dropped {dropped}")
