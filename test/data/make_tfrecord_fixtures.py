#!/usr/bin/python3
"""Reference writer for conveyor's TFRecord / tf.train.Example fixtures (test/data/).

Independent of conveyor's C++ code: the Example schema is declared here from TensorFlow's
tensorflow/core/example/{example,feature}.proto (package `tensorflow`, same field numbers), the
records are framed with a CRC-32C written here in Python, and ZLIB/GZIP use Python's zlib/gzip.
Needs only Debian's python3-protobuf and python3-numpy:

    /usr/bin/python3 test/data/make_tfrecord_fixtures.py test/data

Writes (all small, committed):
  examples.tfrecord / .zlib / .gz   the same 5 tf.train.Examples, uncompressed / ZLIB / GZIP
  examples.expected                 for each record, the element parse_example must give with
                                    kExamplesSpec (see below), in conveyor's literal text form
  raw-{0,1,2}.tfrecord              3 files of raw records b"f<file>-r<record>" (2, 3, 1 records)
  lines.txt.gz                      two concatenated gzip members: "alpha\\nbeta\\n" + "gamma\\r\\ndelta"
  lines.txt.zlib                    one zlib stream of "one\\ntwo\\nthree\\n"
The spec the expected file is for (the C++ test uses the same text):
  label: int64; id: int64; pixels: float32[2, 2]; name: string; opt: int64 = -1;
  tags: var(string); scores: var(float32)
"""
import gzip
import os
import struct
import sys
import zlib

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# --- tf.train.Example, declared from TensorFlow's .proto files ---------------------------------

def _example_classes():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tensorflow_example_ref.proto", package="tensorflow",
                                             syntax="proto3")

    def message(name, fields, nested=()):
        m = fdp.message_type.add(name=name)
        for n in nested:
            m.nested_type.add().CopyFrom(n)
        for fname, number, ftype, label, type_name, packed, oneof in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if packed:
                f.options.packed = True
            if oneof is not None:
                f.oneof_index = oneof
        return m

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    message("BytesList", [("value", 1, F.TYPE_BYTES, rep, None, False, None)])
    message("FloatList", [("value", 1, F.TYPE_FLOAT, rep, None, True, None)])
    message("Int64List", [("value", 1, F.TYPE_INT64, rep, None, True, None)])
    feature = message("Feature", [("bytes_list", 1, F.TYPE_MESSAGE, opt, ".tensorflow.BytesList", False, 0),
                                  ("float_list", 2, F.TYPE_MESSAGE, opt, ".tensorflow.FloatList", False, 0),
                                  ("int64_list", 3, F.TYPE_MESSAGE, opt, ".tensorflow.Int64List", False, 0)])
    feature.oneof_decl.add(name="kind")
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt, type_name=".tensorflow.Feature")
    message("Features", [("feature", 1, F.TYPE_MESSAGE, rep, ".tensorflow.Features.FeatureEntry", False, None)],
            nested=[entry])
    message("Example", [("features", 1, F.TYPE_MESSAGE, opt, ".tensorflow.Features", False, None)])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    factory = message_factory.MessageFactory(pool)
    return factory.GetPrototype(pool.FindMessageTypeByName("tensorflow.Example"))


Example = _example_classes()

# --- TFRecord framing ----------------------------------------------------------------------------

def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = (c >> 8) ^ _TABLE[(c ^ byte) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record))

# --- the examples and their expected elements ------------------------------------------------------

def literal_string(b):
    out = '"'
    for byte in b:
        ch = chr(byte)
        if ch == '"' or ch == '\\':
            out += '\\' + ch
        elif 32 <= byte < 127:
            out += ch
        else:
            out += "\\x%02x" % byte
    return out + '"'


def literal_float32(v):
    s = repr(float(np.float32(v)))  # the shortest text that reads back as this float32
    return s if ("." in s or "e" in s or "inf" in s or "nan" in s) else s + ".0"


def literal_vector(values, kind):
    if len(values) == 0:
        return {"int64": "int64([])", "float32": "[]", "string": "string([])"}[kind]
    fmt = {"int64": str, "float32": literal_float32, "string": literal_string}[kind]
    return "[" + ", ".join(fmt(v) for v in values) + "]"


def make_examples():
    examples, expected = [], []
    for i in range(5):
        ex = Example()
        feat = ex.features.feature
        label = i - 2
        ident = 10**12 + i * 7919
        pixels = (np.arange(4, dtype=np.float32) * np.float32(0.25) + np.float32(i)).astype(np.float32)
        if i == 3:
            pixels[1] = np.float32(0.1)  # not a binary fraction: checks float32 bits end to end
        name = b"rec-%d" % i if i != 4 else b"bin\x00\xff\"q\\"
        tags = [b"t%d" % k for k in range(i)]
        scores = [np.float32(-1.5 * k) for k in range(i % 3)]
        feat["label"].int64_list.value.append(label)
        feat["id"].int64_list.value.append(ident)
        feat["pixels"].float_list.value.extend(pixels.tolist())
        feat["name"].bytes_list.value.append(name)
        if i % 2 == 0:
            feat["opt"].int64_list.value.append(100 + i)
        if i != 0:  # record 0 has no `tags` at all
            feat["tags"].bytes_list.value.extend(tags)
        if i != 1:  # record 1 has no `scores`; record 3 has an empty FloatList
            feat["scores"].float_list.value.extend([float(s) for s in scores])
        examples.append(ex.SerializeToString(deterministic=True))  # map entries sorted: reproducible bytes
        pix = pixels.reshape(2, 2)
        expected.append("(" + ", ".join([
            str(label), str(ident),
            "[" + ", ".join(literal_vector(row.tolist(), "float32") for row in pix) + "]",
            literal_string(name),
            str(100 + i if i % 2 == 0 else -1),
            literal_vector(tags, "string"),
            literal_vector(scores if i != 1 else [], "float32"),
        ]) + ")")
    return examples, expected


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    examples, expected = make_examples()
    framed = b"".join(frame(r) for r in examples)

    def write(name, data):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)

    write("examples.tfrecord", framed)
    write("examples.tfrecord.zlib", zlib.compress(framed, 9))
    write("examples.tfrecord.gz", gzip.compress(framed, mtime=0))
    write("examples.expected", ("\n".join(expected) + "\n").encode())
    for f, count in enumerate([2, 3, 1]):
        write("raw-%d.tfrecord" % f, b"".join(frame(b"f%d-r%d" % (f, r)) for r in range(count)))
    write("lines.txt.gz", gzip.compress(b"alpha\nbeta\n", mtime=0) + gzip.compress(b"gamma\r\ndelta", mtime=0))
    write("lines.txt.zlib", zlib.compress(b"one\ntwo\nthree\n"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
