"""Prometheus remote_write 1.0: snappy (block format) + protobuf ``prometheus.WriteRequest``.

Bodies are decoded by ``wire.py`` (the wire format walked per series, samples as numpy arrays). The
``WriteRequest`` class, built at import time from a ``FileDescriptorProto`` (no protoc step, no generated
files), encodes ``Sample`` rows and is the reference decoder of the tests. Only the fields we use are
declared (``timeseries.labels``, ``timeseries.samples``); others (metadata, exemplars, native
histograms) are skipped by both decoders.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

import cramjam
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from servemetrics.remote_write.wire import WireError, decode_batch
from servemetrics.samples import Sample, SampleBatch

__all__ = [
    "RemoteWriteError",
    "RemoteWriteTooLarge",
    "WriteRequest",
    "decode_write_batch",
    "decode_write_request",
    "declared_length",
    "encode_write_request",
]

_F = descriptor_pb2.FieldDescriptorProto


class RemoteWriteError(ValueError):
    """A remote_write body that is not snappy-compressed ``prometheus.WriteRequest`` protobuf."""


class RemoteWriteTooLarge(RemoteWriteError):
    """A remote_write body whose snappy header declares more decompressed bytes than allowed (a 413)."""


def declared_length(body: bytes) -> int:
    """The decompressed length a snappy block declares: the little-endian base-128 varint that starts it
    (at most 5 bytes, a 32-bit value). Raises ``RemoteWriteError`` for a missing or malformed one."""
    value = 0
    for i, byte in enumerate(body[:5]):
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value >= 1 << 32:
                break
            return value
    raise RemoteWriteError("body is not snappy block-compressed: its length header is malformed")


def _message(
    file: descriptor_pb2.FileDescriptorProto, name: str, fields: tuple[tuple[str, int, int, int, str], ...]
) -> None:
    msg = file.message_type.add(name=name)
    for field_name, number, ftype, label, type_name in fields:
        f = msg.field.add(name=field_name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name


def _build_write_request() -> type:
    file = descriptor_pb2.FileDescriptorProto(
        name="servemetrics/remote.proto", package="prometheus", syntax="proto3"
    )
    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    _message(file, "Label", (("name", 1, _F.TYPE_STRING, opt, ""), ("value", 2, _F.TYPE_STRING, opt, "")))
    _message(
        file, "Sample", (("value", 1, _F.TYPE_DOUBLE, opt, ""), ("timestamp", 2, _F.TYPE_INT64, opt, ""))
    )
    _message(
        file,
        "TimeSeries",
        (
            ("labels", 1, _F.TYPE_MESSAGE, rep, ".prometheus.Label"),
            ("samples", 2, _F.TYPE_MESSAGE, rep, ".prometheus.Sample"),
        ),
    )
    _message(file, "WriteRequest", (("timeseries", 1, _F.TYPE_MESSAGE, rep, ".prometheus.TimeSeries"),))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    message: type = message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.WriteRequest"))
    return message


WriteRequest = _build_write_request()
"""The runtime-built ``prometheus.WriteRequest`` protobuf message class."""


def decode_write_batch(body: bytes, max_decoded_bytes: int | None = None) -> SampleBatch:
    """Decode a remote_write 1.0 body into a ``SampleBatch`` (``wire.decode_batch``: ``__name__`` is the
    series name, samples in body order); non-finite values are dropped, except a sender's stale marker
    (``samples.STALE_NAN``, bit for bit). With ``max_decoded_bytes``, the length the snappy header
    declares is checked before anything is decompressed (a 7-byte body may declare 4 GiB).

    Raises:
        RemoteWriteTooLarge: the declared decompressed length is over ``max_decoded_bytes``.
        RemoteWriteError: bad snappy data, bad protobuf, or a series without ``__name__``.
    """
    if max_decoded_bytes is not None and (size := declared_length(body)) > max_decoded_bytes:
        raise RemoteWriteTooLarge(
            f"the body declares {size} bytes decompressed; at most {max_decoded_bytes} are allowed "
            "(limits.remote_write_body_bytes in the service's config file): send smaller requests "
            "(lower max_samples_per_send in the sender's queue_config)"
        )
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise RemoteWriteError(f"body is not snappy block-compressed: {exc}") from exc
    try:
        return decode_batch(raw)
    except WireError as exc:
        raise RemoteWriteError(str(exc)) from None


def decode_write_request(body: bytes, max_decoded_bytes: int | None = None) -> list[Sample]:
    """``decode_write_batch`` as ``Sample`` rows, in body order (for splitting a refused body, and tests)."""
    return list(decode_write_batch(body, max_decoded_bytes).samples())


def encode_write_request(samples: Iterable[Sample]) -> bytes:
    """Encode samples as a snappy-compressed remote_write 1.0 body, one time series per series
    (consecutive samples of the same series share one ``TimeSeries``)."""
    request = WriteRequest()
    for (name, labels), group in groupby(samples, key=lambda s: (s.name, s.labels)):
        series = request.timeseries.add()
        for k, v in sorted((("__name__", name), *labels)):
            series.labels.add(name=k, value=v)
        for s in group:
            series.samples.add(value=s.value, timestamp=s.ts_ms)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))
