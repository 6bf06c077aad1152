"""Prometheus remote_write 1.0, the one codec every layer uses (snappy block format + protobuf).

- ``decode_write_batch(body, max_decoded_bytes) -> SampleBatch``: the receiver's decoder, columnar
  (``wire.py``; raises ``RemoteWriteError``; ``RemoteWriteTooLarge`` when the snappy header declares
  too much, checked before decompressing); ``decode_write_request``: the same as ``Sample`` rows.
- ``encode_batch(batch) -> (bytes, n)``: the engine store's encoder, numpy-fast, uncompressed protobuf.
- ``encode_write_request(samples) -> bytes``: snappy-compressed protobuf of ``Sample`` rows, for splitting
  a refused body and for tests.
"""

from servemetrics.remote_write.batch import encode_batch
from servemetrics.remote_write.protobuf import (
    RemoteWriteError,
    RemoteWriteTooLarge,
    WriteRequest,
    declared_length,
    decode_write_batch,
    decode_write_request,
    encode_write_request,
)

__all__ = [
    "RemoteWriteError",
    "RemoteWriteTooLarge",
    "WriteRequest",
    "declared_length",
    "decode_write_batch",
    "decode_write_request",
    "encode_batch",
    "encode_write_request",
]
