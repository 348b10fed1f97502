"""Golden record batches from outside this project, used as facts in the tests.

1. ``KAFKA_PYTHON_*``: batches "captured from a real Kafka 0.11 broker" that appear in
   kafka-python's test suite (dpkp/kafka-python, test/record/test_records.py,
   ``record_batch_data_v2`` and ``control_batch_data_v2``). The broker stamped its own
   partition_leader_epoch (0, 1, 2) and base offsets into them; a producer writes epoch -1 and
   base offset 0, fields outside the CRC.
   The control batch there is hand-made: its stored CRC is NOT valid (kafka-python's own
   ``validate_crc()`` returns False for it too).

2. ``JAVA_BATCHES``: one batch per codec written by Apache Kafka's own client library
   (kafka-clients 4.1.1, ``MemoryRecords.builder(buffer, compression, CREATE_TIME, 0)`` with
   default levels; lz4-java 1.8.0, snappy-java 1.1.10.7, zstd-jni 1.5.6-10) from the records in
   ``JAVA_RECORDS``. The generator is ``JavaRecordVectors.java`` next to this file.
"""

from __future__ import annotations

KAFKA_PYTHON_V2_BATCHES = [
    # value == b"123", key null, timestamp 1503229838908; broker epoch 1
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03"
    b"\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]"
    b"\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00",
    # two records with value == b"" at offsets 1 and 2, 168 ms apart; broker epoch 2
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00@\x00\x00\x00\x02\x02\xc8"
    b"\\\xbd#\x00\x00\x00\x00\x00\x01\x00\x00\x01]\xff|\xddl\x00\x00\x01]\xff"
    b"|\xde\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x02\x0c\x00\x00\x00\x01\x00\x00\x0e\x00\xd0\x02\x02\x01\x00"
    b"\x00",
    # value == b"123" at offset 3; broker epoch 2
    b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00;\x00\x00\x00\x02\x02.\x0b"
    b"\x85\xb7\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff|\xe7\x9d\x00\x00\x01]"
    b"\xff|\xe7\x9d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00",
    # value == b"hdr" with header hkey=hval; broker epoch 0
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x00\x02\\"
    b"\xd8\xefR\x00\x00\x00\x00\x00\x00\x00\x00\x01e\x85\xb6\xf3\xc1\x00\x00"
    b"\x01e\x85\xb6\xf3\xc1\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\xff\xff\x00\x00\x00\x01&\x00\x00\x00\x01\x06hdr\x02\x08hkey\x08hval",
]

# (base_offset, [(timestamp_ms, key, value, headers), ...]) for each batch above
KAFKA_PYTHON_V2_RECORDS = [
    (0, [(1503229838908, None, b"123", [])]),
    (1, [(1503229959532, None, b"", []), (1503229959700, None, b"", [])]),
    (3, [(1503229962141, None, b"123", [])]),
    (0, [(1535546684353, None, b"hdr", [("hkey", b"hval")])]),
]

# A transaction ABORT marker: control batch, key = version 0 + type 0 (abort), timestamps 9999999.
KAFKA_PYTHON_CONTROL_BATCH = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00R\x00\x00\x00\x00"
    b"\x02e\x97\xff\xd0\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    b"\x98\x96\x7f\x00\x00\x00\x00\x00\x98\x96"
    b"\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x01@\x00\x00\x00\x08\x00\x00\x00\x00,opaque-control-message\x00"
)

JAVA_BIG_VALUE = bytes(((i * 31 + (i >> 7)) & 0xFF) for i in range(300))

JAVA_RECORDS = [
    (1700000000000, b"key", b"value", [("h\u00e9", b"x"), ("h\u00e9", None)]),
    (1699999999000, None, b"", []),
    (1700000000500, b"", None, []),
    (1700000001000, b"big", JAVA_BIG_VALUE, []),
]

_JAVA_HEX = {
    "none": (
        "000000000000000000000194ffffffff027d2e022f0000000000030000018bcfe568000000018bcfe56be8ffffffffff"
        "ffffffffffffffffff0000000432000000066b65790a76616c7565040668c3a902780668c3a9010e00cf0f020100000e"
        "00e80704000100ee0400d00f0606626967d804001f3e5d7c9bbad9f81736557493b2d1f00f2e4d6c8baac9e807264564"
        "83a2c1e0ff1e3d5c7b9ab9d8f71635547392b1d0ef0e2d4c6b8aa9c8e70625446382a1c0dffe1d3c5b7a99b8d7f61534"
        "537291b0cfee0d2c4b6a89a8c7e60524436281a0bfdefd1c3b5a7998b7d6f51433527190afceed0c2b4a6988a7c6e504"
        "23426181a0bfdefd1c3b5a7998b7d6f51433527190afceed0c2b4a6988a7c6e504234261809fbeddfc1b3a597897b6d5"
        "f4133251708faecdec0b2a496887a6c5e4032241607f9ebddcfb1a39587796b5d4f31231506f8eadcceb0a29486786a5"
        "c4e30221405f7e9dbcdbfa1938577695b4d3f211304f6e8daccbea0928476685a4c3e20221405f7e9dbcdbfa19385776"
        "95b4d3f211304f6e8daccbea0928476685a4c3e201203f5e7d9cbbdaf9183700"
    ),
    "gzip": (
        "000000000000000000000175ffffffff02fb483c820001000000030000018bcfe568000000018bcfe56be8ffffffffff"
        "ffffffffffffffffff000000041f8b08000000000000ff3362606060cb4eade42a4bcc294d6561cb38bc92a9024432f2"
        "319ce767626460e06378c1cec2c0c8f08e85e1023f1b5b5266fa0d160679bbd89ad9bb6efe10370b2d99bce9e2077e3d"
        "df9cee55275fb0abb9a6342f3af8e0bf9c6d4cf5ac9d37be8b9986144fda78e13d9fae4f76d7ca13cfd9545d929b161e"
        "b8ff4fd626ba6ae68eebdf444d828b266e38ff8e57c73bab73c5f167ac2ace498d0bf6dffb2b631d553963fbb5af22c6"
        "418513d69f7bcba3ed95d9b1fcd8531665a744820a1ae6efbbfb47da2ab262fab6ab5f848d020bfad79d7dc3ade599d1"
        "beece8136625c784fa797beffc96b28c289fb6f5ca6721c380fcbeb5675e73697aa4b72d3df29849d121be6eee9edbbf"
        "242dc2cba66eb9fc49d0c03faf77cde9579c1aee69ad4b0e3f22a88051c13eae76ceee5b3f25cc19008e8c63a5630100"
        "00"
    ),
    "snappy": (
        "00000000000000000000018effffffff02c3b3503a0002000000030000018bcfe568000000018bcfe56be8ffffffffff"
        "ffffffffffffffffff0000000482534e4150505900000000010000000100000149e3025032000000066b65790a76616c"
        "7565040668c3a902780106f0b6010e00cf0f020100000e00e80704000100ee0400d00f0606626967d804001f3e5d7c9b"
        "bad9f81736557493b2d1f00f2e4d6c8baac9e80726456483a2c1e0ff1e3d5c7b9ab9d8f71635547392b1d0ef0e2d4c6b"
        "8aa9c8e70625446382a1c0dffe1d3c5b7a99b8d7f61534537291b0cfee0d2c4b6a89a8c7e60524436281a0bfdefd1c3b"
        "5a7998b7d6f51433527190afceed0c2b4a6988a7c6e50423426181a0bfdefd1c3b5a7998b7d6f51433527190afceed0c"
        "2b4a69880d21f061809fbeddfc1b3a597897b6d5f4133251708faecdec0b2a496887a6c5e4032241607f9ebddcfb1a39"
        "587796b5d4f31231506f8eadcceb0a29486786a5c4e30221405f7e9dbcdbfa1938577695b4d3f211304f6e8daccbea09"
        "28476685a4c3e20221407621002c01203f5e7d9cbbdaf9183700"
    ),
    "lz4": (
        "000000000000000000000189ffffffff02948be1c70003000000030000018bcfe568000000018bcfe56be8ffffffffff"
        "ffffffffffffffffff0000000404224d1860408249010000f00632000000066b65790a76616c7565040668c3a9027806"
        "00ffff0f010e00cf0f020100000e00e80704000100ee0400d00f0606626967d804001f3e5d7c9bbad9f81736557493b2"
        "d1f00f2e4d6c8baac9e80726456483a2c1e0ff1e3d5c7b9ab9d8f71635547392b1d0ef0e2d4c6b8aa9c8e70625446382"
        "a1c0dffe1d3c5b7a99b8d7f61534537291b0cfee0d2c4b6a89a8c7e60524436281a0bfdefd1c3b5a7998b7d6f5143352"
        "7190afceed0c2b4a6988a7c6e50423426181a0bfdefd1c3b5a7998b7d6f51433527190afceed0c2b4a6988a7c6e50423"
        "4261809fbeddfc1b3a597897b6d5f4133251708faecdec0b2a496887a6c5e4032241607f9ebddcfb1a39587796b5d4f3"
        "1231506f8eadcceb0a29486786a5c4e30221405f7e9dbcdbfa1938577695b4d3f211304f6e8daccbea0928476685a4c3"
        "e221000ec001203f5e7d9cbbdaf918370000000000"
    ),
    "zstd": (
        "000000000000000000000169ffffffff0241dc4bc10004000000030000018bcfe568000000018bcfe56be8ffffffffff"
        "ffffffffffffffffff0000000428b52ffd0058640900141232000000066b65790a76616c7565040668c3a902780668c3"
        "a9010e00cf0f020100000e00e80704000100ee0400d00f0606626967d804001f3e5d7c9bbad9f81736557493b2d1f00f"
        "2e4d6c8baac9e80726456483a2c1e0ff1e3d5c7b9ab9d8f71635547392b1d0ef0e2d4c6b8aa9c8e70625446382a1c0df"
        "fe1d3c5b7a99b8d7f61534537291b0cfee0d2c4b6a89a8c7e60524436281a0bfdefd1c3b5a7998b7d6f51433527190af"
        "ceed0c2b4a6988a7c6e504234261809fbeddfc1b3a597897b6d5f4133251708faecdec0b2a496887a6c5e4032241607f"
        "9ebddcfb1a39587796b5d4f31231506f8eadcceb0a29486786a5c4e30221405f7e9dbcdbfa1938577695b4d3f211304f"
        "6e8daccbea0928476685a4c3e201203f5e7d9cbbdaf918370002001f18a38d8c4a0a010000"
    ),
}

JAVA_BATCHES = {codec: bytes.fromhex("".join(parts)) for codec, parts in _JAVA_HEX.items()}
