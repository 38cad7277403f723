#!/usr/bin/env python3
"""Writes N synthetic ImageNet-like JPEGs (random sizes around 400x300, 10 classes whose colours
differ so a small CNN can learn them) as WebDataset tar shards and TFRecord shards.

    /usr/bin/python3 examples/imagenet_like/make_shards.py OUT_DIR --images 1024 --shards 8

WebDataset: OUT_DIR/webdataset/shard-K.tar, one sample per image: KEY.jpg (the JPEG) and KEY.cls
(the class as ASCII digits). TFRecord: OUT_DIR/tfrecord/shard-K.tfrecord, one tf.train.Example
per image with "image" (bytes) and "label" (int64), the layout of TensorFlow's ImageNet records.
Only numpy and PIL are needed: the Example protobuf and the record framing are written here.
"""

import argparse
import io
import os
import struct
import sys
import tarfile

import numpy as np
from PIL import Image

CLASSES = 10


def synthetic_image(rng, label):
    h, w = int(rng.integers(240, 376)), int(rng.integers(320, 501))
    y, x = np.mgrid[0:h, 0:w]
    hue = np.array([np.cos(label), np.sin(label), np.cos(2 * label)]) * 90 + 128
    base = hue[None, None, :] + (x[..., None] * 40 // w) - (y[..., None] * 30 // h)
    noise = rng.integers(-25, 26, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def jpeg_bytes(pixels, quality=90):
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


# --- TFRecord framing: length, masked CRC-32C of the length, data, masked CRC-32C of the data.
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


# --- tf.train.Example, encoded by hand (field numbers from example.proto / feature.proto).
def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):  # a length-delimited field
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def example(image, label):
    bytes_feature = _field(1, _field(1, image))          # Feature.bytes_list.value
    int64_feature = _field(3, _field(1, _varint(label)))  # Feature.int64_list.value (packed)
    entries = (_field(1, _field(1, b"image") + _field(2, bytes_feature)) +
               _field(1, _field(1, b"label") + _field(2, int64_feature)))
    return _field(1, entries)                            # Example.features


def write_shards(out_dir, images, shards, seed=0):
    """Returns (webdataset files, tfrecord files, {key: label})."""
    if images <= 0 or shards <= 0:
        raise ValueError("images and shards must be positive")
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(out_dir, "webdataset"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "tfrecord"), exist_ok=True)
    wds, tfr, labels = [], [], {}
    for s in range(shards):
        wd_path = os.path.join(out_dir, "webdataset", f"shard-{s:04d}.tar")
        tf_path = os.path.join(out_dir, "tfrecord", f"shard-{s:04d}.tfrecord")
        with tarfile.open(wd_path, "w", format=tarfile.USTAR_FORMAT) as tar, open(tf_path, "wb") as tf:
            for i in range(s, images, shards):
                key = f"img{i:07d}"
                label = int(rng.integers(0, CLASSES))
                data = jpeg_bytes(synthetic_image(rng, label))
                for ext, payload in (("jpg", data), ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
                tf.write(tfrecord(example(data, label)))
                labels[key] = label
        wds.append(wd_path)
        tfr.append(tf_path)
    return wds, tfr, labels


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--images", type=int, default=1024)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.images <= 0 or args.shards <= 0:
        p.error("--images and --shards must be positive")
    wds, tfr, _ = write_shards(args.out_dir, args.images, args.shards, args.seed)
    print(f"wrote {args.images} images: {len(wds)} WebDataset shards, {len(tfr)} TFRecord shards "
          f"under {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
