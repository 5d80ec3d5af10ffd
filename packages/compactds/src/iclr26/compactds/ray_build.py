"""The distributed build on Ray Data (``[scale]`` extra).

The same shards as :meth:`DatastoreBuilder.build`, embedded by a pool of Ray actors (each loads
the encoder once) that write the shard files into the store's ``build/`` folder; the driver then
trains the index on a sample and adds the shards. The store is byte-identical to a
single-process build, and an interrupted Ray build resumes like any other build (finished shards
are skipped).

This runs on one machine with ``ray.init(num_cpus=...)``; on a cluster, ``build/`` must be on a
file system every node can write (NFS, a mounted bucket).
"""

from __future__ import annotations

from typing import Any

from iclr26.compactds.builder import DatastoreBuilder, Shard, write_shard
from iclr26.shared import check_int, import_optional

__all__ = ["build_with_ray"]


class _EmbedActor:
    """A Ray Data callable class: one encoder per actor, one shard per batch row."""

    def __init__(self, encoder: Any, batch_size: int, work: str) -> None:
        from pathlib import Path

        self.encoder, self.batch_size, self.work = encoder, batch_size, Path(work)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import json

        for key, source, first_id, items in zip(
            batch["key"], batch["source"], batch["first_id"], batch["items"], strict=True
        ):
            shard = Shard(
                str(key), str(source), int(first_id), [tuple(x) for x in json.loads(items)]
            )
            write_shard(self.encoder, self.batch_size, shard, self.work)
        return {"key": batch["key"]}


def build_with_ray(
    builder: DatastoreBuilder,
    *,
    concurrency: int = 2,
    num_cpus: int | None = None,
    address: str | None = None,
):
    """Build ``builder``'s store with a Ray Data actor pool; returns the opened Datastore.

    Args:
        builder: a configured :class:`DatastoreBuilder` with its sources added.
        concurrency: embedding actors (each holds one encoder).
        num_cpus: CPUs of a local Ray instance started here (ignored when Ray is already
            initialised or ``address`` is given).
        address: an existing Ray cluster to connect to.
    """
    if not isinstance(builder, DatastoreBuilder):
        raise TypeError(f"builder must be a DatastoreBuilder, got {type(builder).__name__}")
    concurrency = check_int(concurrency, "concurrency", low=1)
    if num_cpus is not None:
        check_int(num_cpus, "num_cpus", low=1)
    ray = import_optional("ray", dist="iclr26-compactds", extra="scale", purpose="the Ray build")
    import_optional("ray.data", dist="iclr26-compactds", extra="scale", purpose="the Ray build")
    import json

    from iclr26.compactds.datastore import Datastore

    started = False
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)  # fmt: skip
        started = True
    try:
        work, shards, todo = builder.prepare_build()
        if todo:
            rows = [{"key": s.key, "source": s.source, "first_id": s.first_id,
                     "items": json.dumps(s.items)} for s in todo]  # fmt: skip
            done = (
                ray.data.from_items(rows)
                .map_batches(
                    _EmbedActor,
                    fn_constructor_args=(builder.encoder, builder.batch_size, str(work)),
                    batch_size=1,
                    concurrency=concurrency,
                    num_cpus=1,
                )
                .take_all()
            )
            missing = {s.key for s in todo} - {str(r["key"]) for r in done}
            if missing:
                raise RuntimeError(f"Ray workers did not finish shards {sorted(missing)}")
        builder.finalize_build(shards, work, 1, None)
        return Datastore.open(builder.path, encoder=builder.encoder)
    finally:
        if started:
            ray.shutdown()
