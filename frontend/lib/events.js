// A small event emitter, and the store React reads with useSyncExternalStore.


/** A minimal event emitter: `on(name, fn)` returns the unsubscribe function. */
export class Emitter {
  #listeners = new Map();

  /**
   * @param {string} name
   * @param {(payload: any) => void} listener
   * @returns {() => void}
   */
  on(name, listener) {
    if (!this.#listeners.has(name)) this.#listeners.set(name, new Set());
    const listeners = this.#listeners.get(name);
    const entry = (payload) => listener(payload); // the same fn twice gives two subscriptions
    listeners.add(entry);
    return () => listeners.delete(entry);
  }

  /** @protected */
  emit(name, payload) {
    for (const listener of [...(this.#listeners.get(name) ?? [])]) {
      try {
        listener(payload);
      } catch (error) {
        console.error(`voice agent: a "${name}" listener threw`, error);
      }
    }
  }
}

/** Immutable snapshots, for `useSyncExternalStore(subscribe, getSnapshot)`. */
export class Store {
  #snapshot;
  #listeners = new Set();

  constructor(initial) {
    this.#snapshot = Object.freeze({ ...initial });
  }

  getSnapshot = () => this.#snapshot;

  subscribe = (listener) => {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  };

  update(patch) {
    const changed = Object.keys(patch).some((key) => this.#snapshot[key] !== patch[key]);
    if (!changed) return;
    this.#snapshot = Object.freeze({ ...this.#snapshot, ...patch });
    for (const listener of [...this.#listeners]) listener();
  }
}

