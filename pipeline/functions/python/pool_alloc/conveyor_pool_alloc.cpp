// conveyor_pool_alloc: numpy's data allocator in a Python pool process (pool_worker_script.cpp
// imports it by path). While a call is armed with its result block, the first array data of 64 KiB
// or more that fits goes into the block (the worker's memfd, mapped by the script) instead of
// malloc: a function's new result (`x + 1`) is then written by numpy straight where the worker
// views it, and the reply only says where (no copy in the pool process). Everything else goes to
// numpy's own allocator. A block holds one allocation at a time; freeing it is a no-op for memory
// but is tracked, so the script can tell whether an array in the block outlives the call (the
// function kept it: the worker must not reuse the block until it is freed).
//
// NEP 49 (numpy >= 1.22): PyDataMem_SetHandler with a "mem_handler" capsule. The pool process runs
// Python on one thread; the mutex only guards against numpy freeing from another one.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace conveyor::pool_alloc {
namespace {

constexpr std::size_t kMinBytes = 64 << 10; // process_pool.cpp's kBlockBytes
constexpr int kMaxBlocks = 64;              // ResultBlocks::kMaxBlocks

struct Allocation {
  char* ptr = nullptr; // null: none lives in the block
  std::size_t bytes = 0;
};

std::mutex mu;
Allocation live[kMaxBlocks]; // per block index
int live_count = 0;
int armed = -1; // the block of the call running (-1: none)
char* armed_base = nullptr;
std::size_t armed_size = 0;
PyDataMemAllocator numpy_allocator; // the handler this one replaced, for everything else

void* place(std::size_t n) {
  if (n < kMinBytes)
    return nullptr;
  std::lock_guard<std::mutex> lock{mu};
  if (armed < 0 || n > armed_size || live[armed].ptr != nullptr)
    return nullptr;
  live[armed] = {armed_base, n};
  ++live_count;
  return armed_base;
}

// The block holding `p`'s allocation (-1: not one of them); under mu.
int find_locked(void* p) {
  if (live_count == 0)
    return -1;
  for (int i = 0; i < kMaxBlocks; ++i)
    if (live[i].ptr == p)
      return i;
  return -1;
}

void* alloc_malloc(void*, std::size_t n) {
  if (void* p = place(n))
    return p;
  return numpy_allocator.malloc(numpy_allocator.ctx, n);
}

void* alloc_calloc(void*, std::size_t count, std::size_t size) {
  std::size_t n = 0;
  if (__builtin_mul_overflow(count, size, &n))
    return nullptr;
  if (void* p = place(n)) {
    std::memset(p, 0, n); // the block holds an earlier result's bytes
    return p;
  }
  return numpy_allocator.calloc(numpy_allocator.ctx, count, size);
}

void* alloc_realloc(void*, void* p, std::size_t n) {
  std::size_t old_bytes = 0;
  {
    std::lock_guard<std::mutex> lock{mu};
    const int i = find_locked(p);
    if (i < 0)
      return numpy_allocator.realloc(numpy_allocator.ctx, p, n);
    old_bytes = live[i].bytes;
  }
  // Rare (numpy resizes few arrays): the data moves out of the block.
  void* moved = numpy_allocator.malloc(numpy_allocator.ctx, n);
  if (moved == nullptr)
    return nullptr;
  std::memcpy(moved, p, std::min(old_bytes, n));
  std::lock_guard<std::mutex> lock{mu};
  const int i = find_locked(p);
  live[i] = {};
  --live_count;
  return moved;
}

void alloc_free(void*, void* p, std::size_t size) {
  {
    std::lock_guard<std::mutex> lock{mu};
    const int i = find_locked(p);
    if (i >= 0) {
      live[i] = {};
      --live_count;
      return;
    }
  }
  numpy_allocator.free(numpy_allocator.ctx, p, size);
}

PyDataMem_Handler handler = {
  "conveyor_pool_alloc", 1, {nullptr, alloc_malloc, alloc_calloc, alloc_realloc, alloc_free}};

bool block_index(PyObject* arg, int& out) {
  const long i = PyLong_AsLong(arg);
  if (i == -1 && PyErr_Occurred())
    return false;
  if (i < 0 || i >= kMaxBlocks) {
    PyErr_Format(PyExc_ValueError, "block index %ld: expected 0 to %d", i, kMaxBlocks - 1);
    return false;
  }
  out = static_cast<int>(i);
  return true;
}

// install(): numpy's allocator becomes this one (for this thread's context: the script's).
PyObject* install(PyObject*, PyObject*) {
  PyObject* previous = PyDataMem_GetHandler();
  if (previous == nullptr)
    return nullptr;
  auto* old = static_cast<PyDataMem_Handler*>(PyCapsule_GetPointer(previous, "mem_handler"));
  if (old == nullptr) {
    Py_DECREF(previous);
    return nullptr;
  }
  if (old != &handler) // (installed twice: keep the first one's allocator)
    numpy_allocator = old->allocator;
  Py_DECREF(previous); // numpy's default handler is static
  PyObject* capsule = PyCapsule_New(&handler, "mem_handler", nullptr);
  if (capsule == nullptr)
    return nullptr;
  PyObject* replaced = PyDataMem_SetHandler(capsule);
  Py_DECREF(capsule);
  if (replaced == nullptr)
    return nullptr;
  Py_DECREF(replaced);
  Py_RETURN_NONE;
}

// arm(index, map, size): the call about to run may place one array in block `index`, mapped
// writable by `map` (an mmap), of `size` bytes (the block's length now; the map may be longer).
PyObject* arm(PyObject*, PyObject* args) {
  PyObject* index_obj = nullptr;
  PyObject* map = nullptr;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "OOn", &index_obj, &map, &size))
    return nullptr;
  int index = 0;
  if (!block_index(index_obj, index))
    return nullptr;
  Py_buffer view;
  if (PyObject_GetBuffer(map, &view, PyBUF_WRITABLE) != 0)
    return nullptr;
  // The script keeps the map for as long as an allocation in it can live (it maps a block again
  // only when it grew, which the worker does only to a block free on both sides).
  char* base = static_cast<char*>(view.buf);
  const std::size_t length = static_cast<std::size_t>(view.len);
  PyBuffer_Release(&view);
  if (size < 0 || static_cast<std::size_t>(size) > length) {
    PyErr_Format(PyExc_ValueError, "block size %zd: expected 0 to the map's %zu bytes", size,
                 length);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock{mu};
  armed = index;
  armed_base = base;
  armed_size = static_cast<std::size_t>(size);
  Py_RETURN_NONE;
}

PyObject* disarm(PyObject*, PyObject*) {
  std::lock_guard<std::mutex> lock{mu};
  armed = -1;
  Py_RETURN_NONE;
}

// live(index): the bytes of the allocation living in block `index` (0: none).
PyObject* live_bytes(PyObject*, PyObject* arg) {
  int index = 0;
  if (!block_index(arg, index))
    return nullptr;
  std::lock_guard<std::mutex> lock{mu};
  return PyLong_FromSize_t(live[index].ptr != nullptr ? live[index].bytes : 0);
}

// offset(array, index): where the C-contiguous array's data starts in block `index`'s live
// allocation when it lies wholly inside it, else -1.
PyObject* offset(PyObject*, PyObject* args) {
  PyObject* array = nullptr;
  PyObject* index_obj = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &array, &index_obj))
    return nullptr;
  int index = 0;
  if (!block_index(index_obj, index))
    return nullptr;
  if (!PyArray_Check(array))
    return PyLong_FromLong(-1);
  auto* a = reinterpret_cast<PyArrayObject*>(array);
  if (!PyArray_IS_C_CONTIGUOUS(a))
    return PyLong_FromLong(-1);
  const char* data = static_cast<const char*>(PyArray_DATA(a));
  const std::size_t n = static_cast<std::size_t>(PyArray_NBYTES(a));
  std::lock_guard<std::mutex> lock{mu};
  const Allocation& l = live[index];
  if (l.ptr == nullptr || data < l.ptr || static_cast<std::size_t>(data - l.ptr) > l.bytes ||
      n > l.bytes - static_cast<std::size_t>(data - l.ptr))
    return PyLong_FromLong(-1);
  return PyLong_FromSsize_t(data - l.ptr);
}

PyMethodDef methods[] = {
  {"install", install, METH_NOARGS, "Makes this module numpy's data allocator."},
  {"arm", arm, METH_VARARGS, "arm(index, map, size): the next big array may go into this block."},
  {"disarm", disarm, METH_NOARGS, "No more arrays go into a block."},
  {"live", live_bytes, METH_O, "live(index): the bytes of the array data living in the block."},
  {"offset", offset, METH_VARARGS,
   "offset(array, index): the array's data offset in the block's allocation, or -1."},
  {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT,
                      "conveyor_pool_alloc",
                      "numpy's allocator in a conveyor pool process",
                      -1,
                      methods,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr};

} // namespace
} // namespace conveyor::pool_alloc

PyMODINIT_FUNC PyInit_conveyor_pool_alloc() {
  import_array(); // returns NULL (ImportError) when numpy's C API is missing or too old
  return PyModule_Create(&conveyor::pool_alloc::module);
}
