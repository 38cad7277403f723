// The program a Python pool process runs (`python3 -c SCRIPT FD`), kept as text here so that a
// worker needs no installed package to start its pool. Protocol (process_pool.cpp): one
// SOCK_SEQPACKET message per request and per reply on FD; element payloads live in two shared
// memory regions (memfd): the parent's input region, whose descriptor comes with a request when it
// was (re)made, and this process's output region, whose descriptor goes with a reply likewise.
//   request: "<QBQQI" fn id, load kind (0 loaded, 1 pickle, 2 import), load offset, load length,
//            component count; per component: name length "B" + dtype name, "I" rank, "q" * rank
//            dims, "QQ" offset, length (strings: a table of "QQ" offset, length per entry).
//   reply:   b"K" + the same component layout (offsets into the output region; dtype "@J": the
//            function returned argument J unchanged), or
//            b"E" + module NUL summary NUL traceback (module: the one an ImportError names).
#include "pipeline/functions/python/process_pool.hpp"

namespace conveyor::python {

const char* pool_worker_script() {
  return R"PY(
import base64, importlib, mmap, os, pickle, signal, socket, struct, sys, traceback
import numpy as np

# Ctrl-C in the worker's terminal reaches its whole process group: the worker decides when the pool
# ends (this process leaves when its socket closes).
signal.signal(signal.SIGINT, signal.SIG_IGN)

sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
sys.path[:0] = sys.argv[2:]  # the worker's sys.path first: its --python-path, the client's modules
functions = {}
in_map = None
out_fd = os.memfd_create("conveyor-pool-out")
out_map = None
out_size = 0


def read_components(data, pos, region):
    (count,) = struct.unpack_from("<I", data, pos)
    pos += 4
    out = []
    for _ in range(count):
        (n,) = struct.unpack_from("<B", data, pos)
        pos += 1
        dtype = data[pos:pos + n].decode()
        pos += n
        (rank,) = struct.unpack_from("<I", data, pos)
        pos += 4
        shape = struct.unpack_from("<%dq" % rank, data, pos)
        pos += 8 * rank
        offset, length = struct.unpack_from("<QQ", data, pos)
        pos += 16
        if dtype == "string":
            table = np.frombuffer(region, dtype="<u8", count=length // 8, offset=offset)
            items = [bytes(region[int(table[2 * i]):int(table[2 * i] + table[2 * i + 1])])
                     for i in range(len(table) // 2)]
            if rank == 0:
                out.append(items[0])
            else:
                arr = np.empty(len(items), dtype=object)
                arr[:] = items
                out.append(arr.reshape(shape))
        else:
            count_ = length // np.dtype(dtype).itemsize
            out.append(np.frombuffer(region, dtype=dtype, count=count_, offset=offset).reshape(shape))
    return out


def load(kind, blob):
    if kind == 1:  # the graph's base64 text of the cloudpickled callable
        return pickle.loads(base64.b64decode(blob))
    module, _, attr = blob.decode().partition(":")
    fn = importlib.import_module(module)
    for part in attr.split("."):
        fn = getattr(fn, part)
    return fn


def ensure_out(size):
    global out_map, out_size
    if size <= out_size:
        return False
    new_size = max(size, 2 * out_size, 1 << 16)
    os.ftruncate(out_fd, new_size)
    out_map = mmap.mmap(out_fd, new_size)  # the old map goes when nothing views it any more
    out_size = new_size
    return True


def encode(result, args):
    parts = result if isinstance(result, tuple) else (result,)
    if not parts:
        raise ValueError("the function returned an empty tuple; an element needs a component")
    prepared = []
    total = 0
    for value in parts:
        if value is None:
            raise ValueError("the function returned None")
        same = [j for j, a in enumerate(args) if a is value]
        if same:  # an argument returned unchanged: the worker reuses its component
            prepared.append(("@%d" % same[0], (), None))
            continue
        a = np.asarray(value)
        if a.dtype.kind in "OSU":
            items = [x if isinstance(x, bytes) else str(x).encode() if isinstance(x, str) else None
                     for x in a.reshape(-1).tolist()]
            if any(x is None for x in items):
                raise ValueError("an object array must hold bytes or str")
            prepared.append(("string", a.shape, items))
            total += 16 * len(items) + sum(len(x) for x in items) + 16
        else:
            if not a.dtype.isnative:
                a = a.astype(a.dtype.newbyteorder("="))
            a = np.ascontiguousarray(a)
            prepared.append((a.dtype.name, a.shape, a))
            total += a.nbytes + 16
    grew = ensure_out(total)
    header = [b"K", struct.pack("<I", len(prepared))]
    pos = 0
    for dtype, shape, payload in prepared:
        name = dtype.encode()
        header += [struct.pack("<B", len(name)), name, struct.pack("<I", len(shape)),
                   struct.pack("<%dq" % len(shape), *shape)]
        if payload is None:
            header.append(struct.pack("<QQ", 0, 0))
            continue
        if dtype == "string":
            table_at = pos
            pos += 16 * len(payload)
            table = []
            for item in payload:
                out_map[pos:pos + len(item)] = item
                table += [pos, len(item)]
                pos += len(item)
            out_map[table_at:table_at + 16 * len(payload)] = struct.pack("<%dQ" % len(table), *table)
            header.append(struct.pack("<QQ", table_at, 16 * len(payload)))
        else:
            n = payload.nbytes
            if n:
                np.frombuffer(out_map, dtype=np.uint8, count=n, offset=pos)[:] = payload.view(np.uint8).reshape(-1)
            header.append(struct.pack("<QQ", pos, n))
            pos += n
        pos = (pos + 15) & ~15
    return b"".join(header), grew


while True:
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 1)
    except OSError:
        break
    if not msg:
        break
    if fds:  # a new input region; arrays a function kept still view the old one
        in_map = mmap.mmap(fds[0], 0, prot=mmap.PROT_READ)
        os.close(fds[0])
    try:
        fn_id, kind, load_at, load_len = struct.unpack_from("<QBQQ", msg, 0)
        if fn_id not in functions:
            if kind == 0:
                raise RuntimeError("function %d was never sent to this pool process" % fn_id)
            functions[fn_id] = load(kind, bytes(in_map[load_at:load_at + load_len]))
        args = read_components(msg, 25, in_map)
        reply, grew = encode(functions[fn_id](*args), args)
        del args
        socket.send_fds(sock, [reply], [out_fd] if grew else [])
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the worker
        module = getattr(e, "name", None) if isinstance(e, ImportError) else None
        text = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n")
        if len(tb) > 65536:  # a reply is one socket message: keep the end, where the error is
            tb = "...\n" + tb[-65536:]
        sock.send(b"E" + (module or "").encode() + b"\0" + text.encode() + b"\0" + tb.encode())
)PY";
}

} // namespace conveyor::python
