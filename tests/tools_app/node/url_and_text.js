// What URL and TextDecoder make of the cases: the same function runs in node and in the
// sandbox (tests/tools_app/test_prelude_vs_node.py).
(args) => {
  const parts = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port',
    'pathname', 'search', 'hash', 'origin'];
  const url = ([input, base]) => {
    try {
      const parsed = base === null ? new URL(input) : new URL(input, base);
      return Object.fromEntries(parts.map((name) => [name, parsed[name]]));
    } catch (error) { return { error: error.name } }
  };
  const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (p) => parseInt(p, 16));
  const text = (hex) => {
    const input = bytes(hex);
    let fatal;
    try { fatal = new TextDecoder('utf-8', { fatal: true }).decode(input) }
    catch (error) { fatal = { error: error.name } }
    return [new TextDecoder().decode(input), fatal,
      new TextDecoder('utf-8', { ignoreBOM: true }).decode(input)];
  };
  return { urls: args.urls.map(url), texts: args.texts.map(text) };
}
