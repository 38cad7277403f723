// The program a Python pool process runs (`python3 -c SCRIPT FD`), kept as text here so that a
// worker needs no installed package to start its pool (`python3 -c SCRIPT FD ALLOCATOR PATH...`:
// ALLOCATOR is conveyor_pool_alloc.so's path or "", PATH the worker's sys.path). Protocol
// (process_pool.cpp): one
// SOCK_SEQPACKET message per request and per reply on FD, replies in request order; element
// payloads live in shared memory regions (memfd), two per request slot (the parent keeps up to
// kPoolDepth requests in flight, request k in slot k % kPoolDepth): the parent's input region,
// whose descriptor comes with a request when it was (re)made, and this process's output region,
// whose descriptor goes with a reply likewise. A request may name a result block (result_blocks.hpp):
// the parent's memfd, sent with the first request naming it, that the result goes into when it
// fits, and that the parent's tensors then view in place.
//   request: "<QBBQQiQBI" fn id, slot, load kind (0 loaded, 1 pickle, 2 import), load offset,
//            load length, result block (-1: none), its size, descriptors attached (1: the input
//            region, 2: the block, in that order), component count; per component: name length
//            "B" + dtype name (conveyor's: numpy's, and "bfloat16", "string"), "I" rank, "q" *
//            rank dims, "QQ" offset, length (strings: a table of "QQ" offset, length per entry).
//   reply:   b"K" + "<BQ" flags (1: in the block, else the output region; 2: numpy made a
//            component there, nothing was copied; 4: an array of this process lives on in the
//            block, the worker keeps it busy; 8: no allocator), the bytes the result needs there
//            + "<H" count + "<i" * count blocks held before and free now
//            + the same component layout (offsets into the block or region; dtype "@J": the
//            function returned argument J unchanged), or
//            b"E" (b"F": and the block is held, as flag 4) + module NUL summary NUL traceback
//            (module: the one an ImportError names).
#include "pipeline/functions/python/process_pool.hpp"

namespace conveyor::python {

const char* pool_worker_script() {
  return R"PY(
import array, base64, importlib, mmap, os, pickle, signal, socket, struct, sys, traceback
import numpy as np

# Ctrl-C in the worker's terminal reaches its whole process group: the worker decides when the pool
# ends (this process leaves when its socket closes).
signal.signal(signal.SIGINT, signal.SIG_IGN)

sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
sys.path[:0] = sys.argv[3:]  # the worker's sys.path first: its --python-path, the client's modules


def load_allocator(path):
    """numpy's allocator that puts a call's big new array in its result block (conveyor_pool_alloc.cpp),
    or None: each result is then copied into its block (the worker warns; the reason goes to stderr)."""
    if not path:
        return None
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("conveyor_pool_alloc", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.install()
        return module
    except Exception as e:  # noqa: BLE001 - a missing or mismatched module: the copy still works
        print("conveyor pool process %d: cannot load %s (%s: %s); copying results instead" %
              (os.getpid(), path, type(e).__name__, e), file=sys.stderr, flush=True)
        return None


alloc = load_allocator(sys.argv[2])
held = set()  # blocks an array of this process still lives in (the worker leases them to no one)
functions = {}  # fn id -> the callable, or the exception loading it raised
SLOTS = 2  # kPoolDepth
in_maps = [None] * SLOTS
out_fds = [os.memfd_create("conveyor-pool-out") for _ in range(SLOTS)]
out_maps = [None] * SLOTS
out_sizes = [0] * SLOTS
block_fds = {}  # result block index -> its memfd (the parent's)
block_maps = {}  # index -> its map, as big as the largest size a request gave it
chunk_maps = {}  # the worker's shared arena: chunk id -> its map (read-only; chunks never change size)
# Parsed once: the per-call cost is what a CPU-bound map pays per element.
REQUEST = struct.Struct("<QBBQQiQB")  # then the components, from their count on
U8, U32, QQ, BQ = struct.Struct("<B"), struct.Struct("<I"), struct.Struct("<QQ"), struct.Struct("<BQ")
IQQ = struct.Struct("<iQQ")  # a component's bytes: where (-1: the slot's input region, else a chunk), offset, length
U16, I32 = struct.Struct("<H"), struct.Struct("<i")
NONE_RELEASED = U16.pack(0)
# Reply flags (process_pool.cpp): the result is in the block; a component of it was made there by
# numpy (no copy here); this process keeps the block (an array in it outlives the call); no allocator.
IN_BLOCK, PLACED, HELD, NO_ALLOCATOR = 1, 2, 4, 8
FD_SPACE = socket.CMSG_SPACE((2 + 8) * array.array("i").itemsize)  # region, block, kMaxNewChunks
request_buf = bytearray(1 << 20)
request_view = memoryview(request_buf)
dtypes = {}  # name -> np.dtype
names = {}  # np.dtype -> its name (numpy computes dtype.name in Python: ~1.5 us a call)
# conveyor's bfloat16 as numpy holds it (numpy_dtypes.cpp): uint16 bit patterns marked in the
# dtype's metadata, which dtype equality (and so the `names` key) ignores.
BFLOAT16 = np.dtype("uint16", metadata={"conveyor_dtype": "bfloat16"})
shape_structs = {}  # rank -> struct of the dims
headers = {}  # (dtype name, shape) -> their bytes in a reply (before offset and length)
# Per slot: the last request's component layout (its bytes) and the numpy views read_components
# made of it, while the slot's input region stays the same map: the next request with the same
# layout (same dtypes, shapes, offsets) gets fresh views of them (a function may set a view's
# shape in place) instead of parsing it again (~1.2 us against ~0.35 us per call). None: strings
# (their items are copied out), or nothing yet.
arg_cache = [None] * SLOTS


def dims(rank):
    s = shape_structs.get(rank)
    if s is None:
        s = shape_structs[rank] = struct.Struct("<%dq" % rank)
    return s


def read_components(data, pos, slot_region):
    (count,) = U32.unpack_from(data, pos)
    pos += 4
    out = []
    for _ in range(count):
        n = data[pos]
        pos += 1
        name = bytes(data[pos:pos + n])
        pos += n
        (rank,) = U32.unpack_from(data, pos)
        pos += 4
        shape = dims(rank).unpack_from(data, pos)
        pos += 8 * rank
        where, offset, length = IQQ.unpack_from(data, pos)
        pos += 20
        region = slot_region if where < 0 else chunk_maps[where]
        if name == b"string":
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
            dtype = dtypes.get(name)
            if dtype is None:
                dtype = dtypes[name] = BFLOAT16 if name == b"bfloat16" else np.dtype(name.decode())
            a = np.frombuffer(region, dtype=dtype, count=length // dtype.itemsize, offset=offset)
            out.append(a.reshape(shape) if rank != 1 else a)
    return out


def load(kind, blob):
    if kind == 1:  # the graph's base64 text of the cloudpickled callable
        return pickle.loads(base64.b64decode(blob))
    module, _, attr = blob.decode().partition(":")
    fn = importlib.import_module(module)
    for part in attr.split("."):
        fn = getattr(fn, part)
    return fn


def ensure_out(slot, size):
    if size <= out_sizes[slot]:
        return False
    new_size = max(size, 2 * out_sizes[slot], 1 << 16)
    os.ftruncate(out_fds[slot], new_size)
    out_maps[slot] = mmap.mmap(out_fds[slot], new_size)  # the old map goes when nothing views it
    out_sizes[slot] = new_size
    return True


def header(dtype, shape):
    key = (dtype, shape)
    h = headers.get(key)
    if h is None:
        if len(headers) > 4096:  # shapes that vary per element: keep it bounded
            headers.clear()
        name = dtype.encode()
        h = headers[key] = (U8.pack(len(name)) + name + U32.pack(len(shape)) +
                            dims(len(shape)).pack(*shape))
    return h


def block_map(block, size):
    m = block_maps.get(block)
    if m is None or len(m) < size:  # new, or grown by the parent while free
        m = block_maps[block] = mmap.mmap(block_fds[block], size)
    return m


def encode(slot, result, args, block, block_size):
    """The reply's flags, size and components (after the count of released blocks), and whether
    the output region grew."""
    parts = result if isinstance(result, tuple) else (result,)
    if not parts:
        raise ValueError("the function returned an empty tuple; an element needs a component")
    # The array numpy made in the block during the call (0: none): a component inside it is
    # already where the worker views it; the other components go after it.
    live = alloc.live(block) if alloc is not None and block >= 0 else 0
    prepared = []
    total = (live + 15) & ~15
    for value in parts:
        if value is None:
            raise ValueError("the function returned None")
        for j, arg in enumerate(args):  # (a loop: a comprehension is a call per element)
            if arg is value:
                break
        else:
            j = -1
        if j >= 0:  # an argument returned unchanged: the worker reuses its component
            prepared.append(("@%d" % j, (), None, -1))
            continue
        a = np.asarray(value)
        dtype = a.dtype
        if dtype.kind in "OSU":
            items = [x if isinstance(x, bytes) else str(x).encode() if isinstance(x, str) else None
                     for x in a.reshape(-1).tolist()]
            if any(x is None for x in items):
                raise ValueError("an object array must hold bytes or str")
            prepared.append(("string", a.shape, items, -1))
            total += 16 * len(items) + sum(len(x) for x in items) + 16
        else:
            if not dtype.isnative:
                a = a.astype(dtype.newbyteorder("="))
                dtype = a.dtype
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            at = alloc.offset(a, block) if live else -1
            if dtype.metadata is not None and dtype.metadata.get("conveyor_dtype") == "bfloat16":
                name = "bfloat16"
            else:
                name = names.get(dtype)
                if name is None:
                    name = names[dtype] = dtype.name
            prepared.append((name, a.shape, a, at))
            if at < 0:
                total += a.nbytes + 16
    in_block = block >= 0 and total <= block_size
    grew = False
    placed = False
    if in_block:
        out_map = block_map(block, block_size)
        pos = (live + 15) & ~15
    else:
        total -= (live + 15) & ~15  # laid out from 0, each component copied
        for _, _, payload, at in prepared:
            if at >= 0:
                total += payload.nbytes + 16
        grew = ensure_out(slot, total)
        out_map = out_maps[slot]
        pos = 0
    body = [U32.pack(len(prepared))]
    for dtype, shape, payload, at in prepared:
        body.append(header(dtype, shape))
        if payload is None:
            body.append(QQ.pack(0, 0))
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
            body.append(QQ.pack(table_at, 16 * len(payload)))
        elif in_block and at >= 0:  # numpy wrote it in the block: nothing to copy
            body.append(QQ.pack(at, payload.nbytes))
            placed = True
            continue
        else:
            n = payload.nbytes
            if n:  # (the buffer of a C-contiguous array: its bytes; ~1 us less than a uint8 view)
                out_map[pos:pos + n] = payload
            body.append(QQ.pack(pos, n))
            pos += n
        pos = (pos + 15) & ~15
    flags = (IN_BLOCK if in_block else 0) | (PLACED if placed else 0) | (0 if alloc else NO_ALLOCATOR)
    return flags, total, b"".join(body), grew


def keep_block(slot, block, flags, total):
    """After the call's references are gone: when an array in the request's block still lives here
    (the function kept it, or a view of it), the worker must neither view the result there (the
    function may change it) nor lease the block again until a later reply releases it; a result
    written there goes by the output region instead (same layout). Returns the flags, and whether
    the output region grew."""
    if block < 0 or alloc is None or not alloc.live(block):
        return flags, False
    held.add(block)
    if not flags & IN_BLOCK:
        return flags | HELD, False
    grew = ensure_out(slot, total)
    memoryview(out_maps[slot])[:total] = memoryview(block_map(block, total))[:total]
    return (flags & NO_ALLOCATOR) | HELD, grew


def released():
    """The held blocks whose arrays are gone since: the worker may lease them again."""
    if not held:
        return NONE_RELEASED
    free = [b for b in held if not alloc.live(b)]
    held.difference_update(free)
    return U16.pack(len(free)) + b"".join(I32.pack(b) for b in free)


def serve():
    """The request loop, a function: its names are locals, not the module's dict (~1 us a call)."""
    recv, send, unpack, header_size = sock.recvmsg_into, sock.send, REQUEST.unpack_from, REQUEST.size
    buffers = [request_buf]
    while True:
        try:
            size, ancdata, _, _ = recv(buffers, FD_SPACE)
        except OSError:
            break
        if not size:
            break
        fn_id, slot, kind, load_at, load_len, block, block_size, attached = unpack(request_buf, 0)
        if attached:
            fds = []
            for level, kind_, data in ancdata:
                if level == socket.SOL_SOCKET and kind_ == socket.SCM_RIGHTS:
                    fds.extend(array.array("i", data[:len(data) - len(data) % array.array("i").itemsize]))
            if attached & 1:  # a new input region; arrays a function kept view the old
                fd = fds.pop(0)
                in_maps[slot] = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
                os.close(fd)
                arg_cache[slot] = None
            if attached & 2:  # a result block this process has not seen (kept for its later requests)
                block_fds[block] = fds.pop(0)
                block_maps.pop(block, None)
            if attached & 4:  # arena chunks to map (their ids end the request, then their count)
                count = request_buf[size - 1]
                size -= 1 + 4 * count
                for chunk in struct.unpack_from("<%dI" % count, request_buf, size):
                    fd = fds.pop(0)
                    if chunk not in chunk_maps:  # (two requests sent before either reached here)
                        chunk_maps[chunk] = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
                    os.close(fd)
        armed = alloc is not None and block >= 0
        try:
            fn = functions.get(fn_id)
            if fn is None:
                if kind == 0:
                    raise RuntimeError("function %d was never sent to this pool process" % fn_id)
                try:
                    fn = load(kind, bytes(in_maps[slot][load_at:load_at + load_len]))
                except BaseException as e:  # noqa: BLE001 - the requests queued behind it raise it too
                    fn = e
                functions[fn_id] = fn
            if isinstance(fn, BaseException):
                raise fn
            layout = request_view[header_size:size]
            cached = arg_cache[slot]
            if cached is None or cached[0] != layout:
                args = read_components(request_view[:size], header_size, in_maps[slot])
                numeric = all(isinstance(a, np.ndarray) and a.dtype.kind != "O" for a in args)
                cached = arg_cache[slot] = (bytes(layout), args) if numeric else None
            if cached is not None:  # the function gets views of the kept ones, the first time too
                args = [a.view() for a in cached[1]]
            if armed:
                alloc.arm(block, block_map(block, block_size), block_size)
            try:
                result = fn(*args)
            finally:
                if armed:
                    alloc.disarm()
            flags, total, body, grew = encode(slot, result, args, block, block_size)
            del args, result  # what the function kept still holds its arrays
            grew_now = False
            if armed:
                flags, grew_now = keep_block(slot, block, flags, total)
            reply = b"K" + BQ.pack(flags, total) + (released() if held else NONE_RELEASED) + body
            del body
            if grew or grew_now:
                socket.send_fds(sock, [reply], [out_fds[slot]])
            else:
                send(reply)
            continue
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the worker
            module = getattr(e, "name", None) if isinstance(e, ImportError) else None
            text = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n")
            if len(tb) > 65536:  # a reply is one socket message: keep the end, where the error is
                tb = "...\n" + tb[-65536:]
            error = (module or "").encode() + b"\0" + text.encode() + b"\0" + tb.encode()
        args = result = None  # (a failed call's): then "F" when an array it made in the block lives on
        kept = keep_block(slot, block, 0, 0)[0] & HELD
        send((b"F" if kept else b"E") + error)


serve()
)PY";
}

} // namespace conveyor::python
