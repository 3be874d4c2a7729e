"""What a resumable session keeps between processes, behind a store interface: the
contract (``store.ResumeStore``), an in-memory store, and the snapshot deltas. The Redis
store and the session host live in ``realtime.resume``."""
