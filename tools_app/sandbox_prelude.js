// The runtime every tool-handler context gets before handler code runs.
// tools_app/sandbox.py evaluates this file as a function expression and calls it
// with a config object: { heapBytes, maxResultBytes, maxConsoleBytes, randomKey }, and
// the ChaCha20 block function of chacha20.js.
//
// It adds the small Web API surface handlers may use (URL, URLSearchParams,
// TextEncoder, TextDecoder, atob, btoa, crypto, console, timers, Headers,
// DOMException) and the bookkeeping through which Python drives the context:
//
//   __sandbox.start(source, argsJson, secretsJson)   compile and call the handler
//   __sandbox.drain()    JSON: outcome, queued host ops, console text, next timer
//   __sandbox.step(repliesJson)   settle host ops, then fire the timers that are due
//
// JavaScript never calls into Python. Work for the host (ctx.fetch,
// crypto.subtle.digest) is queued here and pulled by drain(); answers come back
// through step(), which also fires timers. So handler code only runs when Python
// asked for it, and Python never waits on a busy isolate: it can always end it.
(function installSandboxRuntime(config, chacha20Block) {
  'use strict';

  const G = globalThis;

  // -- Intrinsics, captured before handler code can replace them ---------------
  const ReflectApply = Reflect.apply;
  const ReflectConstruct = Reflect.construct;
  const ReflectGet = Reflect.get;
  const ReflectSet = Reflect.set;
  const ReflectOwnKeys = Reflect.ownKeys;
  const ReflectDefineProperty = Reflect.defineProperty;
  const ReflectDeleteProperty = Reflect.deleteProperty;
  const ReflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
  const uncurry = (fn) => function uncurried(self, ...args) {
    return ReflectApply(fn, self, args);
  };
  const getter = (object, name) => uncurry(ReflectGetOwnPropertyDescriptor(object, name).get);
  const ObjectCreate = Object.create;
  const ObjectFreeze = Object.freeze;
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const ObjectPrototypeToString = uncurry(Object.prototype.toString);
  const ObjectPrototypeHasOwnProperty = uncurry(Object.prototype.hasOwnProperty);
  const ArrayIsArray = Array.isArray;
  const ArrayPush = uncurry(Array.prototype.push);
  const ArrayJoin = uncurry(Array.prototype.join);
  const ArraySort = uncurry(Array.prototype.sort);
  const ArrayMap = uncurry(Array.prototype.map);
  const ArrayFilter = uncurry(Array.prototype.filter);
  const ArraySplice = uncurry(Array.prototype.splice);
  const MathFloor = Math.floor;
  const MathMin = Math.min;
  const MathMax = Math.max;
  const NumberIsInteger = Number.isInteger;
  const StringCtor = String;
  const StringFromCharCode = String.fromCharCode;
  const StringCharCodeAt = uncurry(String.prototype.charCodeAt);
  const StringCodePointAt = uncurry(String.prototype.codePointAt);
  const StringSlice = uncurry(String.prototype.slice);
  const StringIndexOf = uncurry(String.prototype.indexOf);
  const StringToWellFormed = uncurry(String.prototype.toWellFormed);
  const StringToLowerCase = uncurry(String.prototype.toLowerCase);
  const StringSplit = uncurry(String.prototype.split);
  const StringRepeat = uncurry(String.prototype.repeat);
  const StringPadStart = uncurry(String.prototype.padStart);
  const StringPadEnd = uncurry(String.prototype.padEnd);
  const RegExpTest = uncurry(RegExp.prototype.test);
  const FunctionToString = uncurry(Function.prototype.toString);
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const DateNow = Date.now;
  const PromiseCtor = Promise;
  const PromiseThen = uncurry(Promise.prototype.then);
  const PromiseResolveStatic = Promise.resolve;
  const PromiseResolve = (value) => ReflectApply(PromiseResolveStatic, PromiseCtor, [value]);
  const PromiseRejectStatic = Promise.reject;
  const PromiseReject = (reason) => ReflectApply(PromiseRejectStatic, PromiseCtor, [reason]);
  const MapCtor = Map;
  const MapGet = uncurry(Map.prototype.get);
  const MapSet = uncurry(Map.prototype.set);
  const MapHas = uncurry(Map.prototype.has);
  const MapDelete = uncurry(Map.prototype.delete);
  const MapForEach = uncurry(Map.prototype.forEach);
  const WeakMapCtor = WeakMap;
  const WeakMapGet = uncurry(WeakMap.prototype.get);
  const WeakMapSet = uncurry(WeakMap.prototype.set);
  const WeakSetCtor = WeakSet;
  const WeakSetAdd = uncurry(WeakSet.prototype.add);
  const WeakSetHas = uncurry(WeakSet.prototype.has);
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const SyntaxErrorCtor = SyntaxError;
  const SymbolIterator = Symbol.iterator;
  const OriginalProxy = Proxy;
  const ArrayCtor = Array;
  const EncodeURIComponent = encodeURIComponent;
  const Unescape = unescape;
  const IndirectEval = eval;
  const OriginalArrayBuffer = ArrayBuffer;
  const OriginalUint8Array = Uint8Array;
  const OriginalUint32Array = Uint32Array;
  const TypedArrayPrototype = ObjectGetPrototypeOf(Uint8Array.prototype);
  const TypedArrayTag = getter(TypedArrayPrototype, Symbol.toStringTag);
  const TypedArrayByteLength = getter(TypedArrayPrototype, 'byteLength');
  const TypedArrayLength = getter(TypedArrayPrototype, 'length');
  const ArrayBufferByteLength = getter(ArrayBuffer.prototype, 'byteLength');
  const SharedArrayBufferByteLength = getter(SharedArrayBuffer.prototype, 'byteLength');
  const DataViewBuffer = getter(DataView.prototype, 'buffer');
  const DataViewByteOffset = getter(DataView.prototype, 'byteOffset');
  const DataViewByteLength = getter(DataView.prototype, 'byteLength');
  const TypedArrayBuffer = getter(TypedArrayPrototype, 'buffer');
  const TypedArrayByteOffset = getter(TypedArrayPrototype, 'byteOffset');
  const Uint8ArrayToBase64 = uncurry(Uint8Array.prototype.toBase64);
  const Uint8ArrayFromBase64 = Uint8Array.fromBase64;
  const fromBase64 = (text) => ReflectApply(Uint8ArrayFromBase64, OriginalUint8Array, [text]);

  const define = (target, name, value) => ObjectDefineProperty(target, name, {
    value, writable: true, enumerable: false, configurable: true,
  });
  const brandCheck = (read, value) => {
    try {
      read(value);
      return true;
    } catch {
      return false;
    }
  };
  const isArrayBuffer = (value) => brandCheck(ArrayBufferByteLength, value)
    || brandCheck(SharedArrayBufferByteLength, value);
  const isTypedArray = (value) => TypedArrayTag(value) !== undefined;
  const isDataView = (value) => brandCheck(DataViewBuffer, value);

  // -- Resource guards -----------------------------------------------------------
  // The V8 heap limit (enforced by the engine) does not cover array buffers,
  // which live outside the heap, nor builtins that loop over a huge `length`
  // without checking for termination (a timed-out call could never be stopped).
  // Buffers are charged against a per-call budget; builtins that take a length
  // from their receiver refuse lengths no real array within the heap could have.
  const memoryErrors = new WeakSetCtor();
  const memoryError = () => {
    const error = new RangeErrorCtor('memory limit exceeded');
    WeakSetAdd(memoryErrors, error);
    return error;
  };
  const heapBytes = config.heapBytes;
  const maxElements = MathMax(1024, MathFloor(heapBytes / 4));
  let bufferBytes = 0;
  const chargeBuffer = (bytes) => {
    const amount = +bytes;
    if (!(amount > 0)) return;
    bufferBytes += amount;
    if (bufferBytes > heapBytes) throw memoryError();
  };
  const toLength = (value) => {
    const number = +value;
    if (!(number > 0)) return 0;
    return number === Infinity ? 2 ** 53 - 1 : MathMin(MathFloor(number), 2 ** 53 - 1);
  };
  const checkElements = (count) => {
    if (count > maxElements) throw memoryError();
    return count;
  };

  // Proxies must not report a huge length either (a builtin would trust it).
  const proxyTraps = ['apply', 'construct', 'defineProperty', 'deleteProperty', 'get',
    'getOwnPropertyDescriptor', 'getPrototypeOf', 'has', 'isExtensible', 'ownKeys',
    'preventExtensions', 'set', 'setPrototypeOf'];
  const reflectTraps = ObjectCreate(null);
  for (let i = 0; i < proxyTraps.length; i += 1) reflectTraps[proxyTraps[i]] = Reflect[proxyTraps[i]];
  const guardedHandler = (handler) => {
    if (handler === null || (typeof handler !== 'object' && typeof handler !== 'function')) {
      return handler;
    }
    const guarded = ObjectCreate(null);
    for (let i = 0; i < proxyTraps.length; i += 1) {
      const name = proxyTraps[i];
      const fallback = reflectTraps[name];
      guarded[name] = function trap(...args) {
        const userTrap = handler[name];
        const result = userTrap === undefined || userTrap === null
          ? ReflectApply(fallback, undefined, args)
          : ReflectApply(userTrap, handler, args);
        if (name === 'get' && args[1] === 'length') checkElements(toLength(result));
        if (name === 'getOwnPropertyDescriptor' && args[1] === 'length' && result) {
          checkElements(toLength(result.value));
        }
        return result;
      };
    }
    return guarded;
  };
  const SandboxProxy = new OriginalProxy(OriginalProxy, {
    construct(target, args, newTarget) {
      const proxyArgs = [args[0], guardedHandler(args[1])];
      return ReflectConstruct(target, proxyArgs, newTarget === SandboxProxy ? target : newTarget);
    },
  });
  const OriginalRevocable = Proxy.revocable;
  define(OriginalProxy, 'revocable', function revocable(target, handler) {
    return ReflectApply(OriginalRevocable, OriginalProxy, [target, guardedHandler(handler)]);
  });
  define(G, 'Proxy', SandboxProxy);

  // An array-like receiver gets a fixed length, so a getter cannot show one
  // length to the check and another to the builtin.
  const withPinnedLength = (object, length) => {
    let pinned = length;
    return new OriginalProxy(object, {
      get(target, key) {
        return key === 'length' ? pinned : ReflectGet(target, key, target);
      },
      set(target, key, value) {
        if (key === 'length') pinned = checkElements(toLength(value));
        return ReflectSet(target, key, value, target);
      },
    });
  };
  const ArrayPrototype = Array.prototype;
  const guardArrayMethod = (name) => {
    const original = ArrayPrototype[name];
    if (typeof original !== 'function') return;
    const guarded = {
      [name](...args) {
        if (this === null || this === undefined) return ReflectApply(original, this, args);
        if (typeof this !== 'object' && typeof this !== 'function') {
          if (typeof this === 'string') checkElements(this.length);
          return ReflectApply(original, this, args);
        }
        if (ArrayIsArray(this) || name === 'concat') {
          // concat only spreads its receiver when it is an array (or asks to be).
          if (ArrayIsArray(this)) checkElements(toLength(this.length));
          return ReflectApply(original, this, args);
        }
        const receiver = withPinnedLength(this, checkElements(toLength(this.length)));
        const result = ReflectApply(original, receiver, args);
        return result === receiver ? this : result;
      },
    }[name];
    define(ArrayPrototype, name, guarded);
  };
  const guardedArrayMethods = ['concat', 'copyWithin', 'every', 'fill', 'filter', 'find',
    'findIndex', 'findLast', 'findLastIndex', 'forEach', 'includes', 'indexOf', 'join',
    'lastIndexOf', 'map', 'reduce', 'reduceRight', 'reverse', 'shift', 'slice', 'some',
    'sort', 'splice', 'toLocaleString', 'toReversed', 'toSorted', 'toSpliced', 'unshift',
    'with'];
  for (let i = 0; i < guardedArrayMethods.length; i += 1) guardArrayMethod(guardedArrayMethods[i]);

  // flat() walks nested arrays inside the builtin, so it is done here instead,
  // in JavaScript that a timeout can interrupt.
  const flattenInto = (target, source, depth) => {
    const length = checkElements(toLength(source.length));
    for (let index = 0; index < length; index += 1) {
      if (!(index in source)) continue;
      const element = source[index];
      if (depth > 0 && ArrayIsArray(element)) flattenInto(target, element, depth - 1);
      else ArrayPush(target, element);
      checkElements(target.length);
    }
  };
  define(ArrayPrototype, 'flat', function flat(depth = 1) {
    const source = Object(this);
    let levels = +depth;
    if (levels !== levels) levels = 0;
    const result = [];
    flattenInto(result, source, levels === Infinity ? Infinity : MathFloor(levels));
    return result;
  });
  define(ArrayPrototype, 'flatMap', function flatMap(callback, thisArg) {
    const mapped = ReflectApply(ArrayPrototype.map, this, [callback, thisArg]);
    const result = [];
    flattenInto(result, mapped, 1);
    return result;
  });

  // Array.from over an array-like (not an iterable) is done here for the same
  // reason; iterables already run through interruptible iterator calls.
  const OriginalArrayFrom = Array.from;
  const guardedArrayFrom = function from(items, mapFn, thisArg) {
    if (items === null || items === undefined || typeof Object(items)[SymbolIterator] === 'function'
      || typeof items === 'string') {
      if (typeof items === 'string') checkElements(items.length);
      return ReflectApply(OriginalArrayFrom, this, [items, mapFn, thisArg]);
    }
    if (mapFn !== undefined && typeof mapFn !== 'function') {
      throw new TypeErrorCtor('Array.from: the map function is not callable');
    }
    const source = Object(items);
    const length = checkElements(toLength(source.length));
    const result = typeof this === 'function' ? ReflectConstruct(this, [length])
      : new ArrayCtor(length);
    for (let index = 0; index < length; index += 1) {
      const value = source[index];
      ObjectDefineProperty(result, index, {
        value: mapFn === undefined ? value : ReflectApply(mapFn, thisArg, [value, index]),
        writable: true, enumerable: true, configurable: true,
      });
    }
    result.length = length;
    return result;
  };
  define(Array, 'from', guardedArrayFrom);
  const toPlainArray = (items) => ReflectApply(guardedArrayFrom, ArrayCtor, [items]);

  define(String, 'raw', function raw(template, ...substitutions) {
    const strings = Object(Object(template).raw);
    const length = checkElements(toLength(strings.length));
    let out = '';
    for (let index = 0; index < length; index += 1) {
      out += StringCtor(strings[index]);
      if (index + 1 < length && index < substitutions.length) out += StringCtor(substitutions[index]);
    }
    return out;
  });
  const StringPrototype = String.prototype;
  define(StringPrototype, 'split', function split(separator, limit) {
    const text = StringCtor(this);
    checkElements(text.length);
    return StringSplit(text, separator, limit);
  });
  define(StringPrototype, 'repeat', function repeat(count) {
    const text = StringCtor(this);
    if (text.length * MathMax(0, +count || 0) > heapBytes) throw memoryError();
    return StringRepeat(text, count);
  });
  define(StringPrototype, 'padStart', function padStart(maxLength, fill) {
    if (+maxLength > heapBytes) throw memoryError();
    return StringPadStart(StringCtor(this), maxLength, fill);
  });
  define(StringPrototype, 'padEnd', function padEnd(maxLength, fill) {
    if (+maxLength > heapBytes) throw memoryError();
    return StringPadEnd(StringCtor(this), maxLength, fill);
  });
  define(JSON, 'parse', function parse(text, reviver) {
    const source = StringCtor(text);
    if (source.length > heapBytes) throw memoryError();
    return JSONParse(source, reviver);
  });

  // Buffers: constructors are wrapped (the originals stay unreachable because
  // every `constructor` property points at the wrapper), and the methods that
  // allocate without going through a constructor charge the budget themselves.
  const bufferArgumentBytes = (args) => MathMax(toLength(args[0]),
    args[1] !== null && typeof args[1] === 'object' ? toLength(args[1].maxByteLength) : 0);
  const wrapConstructor = (name, chargeFor) => {
    const original = G[name];
    const wrapper = new OriginalProxy(original, {
      construct(target, args, newTarget) {
        const prepared = chargeFor(args);
        return ReflectConstruct(target, prepared, newTarget === wrapper ? target : newTarget);
      },
    });
    define(original.prototype, 'constructor', wrapper);
    define(G, name, wrapper);
    return wrapper;
  };
  wrapConstructor('ArrayBuffer', (args) => {
    chargeBuffer(bufferArgumentBytes(args));
    return args;
  });
  wrapConstructor('SharedArrayBuffer', (args) => {
    chargeBuffer(bufferArgumentBytes(args));
    return args;
  });
  const typedArrayNames = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array',
    'Uint16Array', 'Int32Array', 'Uint32Array', 'Float16Array', 'Float32Array', 'Float64Array',
    'BigInt64Array', 'BigUint64Array'];
  for (let i = 0; i < typedArrayNames.length; i += 1) {
    const name = typedArrayNames[i];
    if (typeof G[name] !== 'function') continue;
    const bytesPerElement = G[name].BYTES_PER_ELEMENT;
    wrapConstructor(name, (args) => {
      const source = args[0];
      if (source === null || (typeof source !== 'object' && typeof source !== 'function')) {
        chargeBuffer(toLength(source) * bytesPerElement);
        return args;
      }
      if (isArrayBuffer(source)) return args;
      if (isTypedArray(source)) {
        chargeBuffer(TypedArrayLength(source) * bytesPerElement);
        return args;
      }
      // Iterables and array-likes become a plain array first, through the
      // guarded Array.from, so the length the builtin sees is the one charged.
      const items = toPlainArray(source);
      chargeBuffer(items.length * bytesPerElement);
      return [items];
    });
  }
  const allocatedBytes = (value) => {
    if (isTypedArray(value)) return TypedArrayByteLength(value);
    return brandCheck(ArrayBufferByteLength, value) ? ArrayBufferByteLength(value) : 0;
  };
  const chargeResult = (object, name) => {
    const original = object[name];
    if (typeof original !== 'function') return;
    define(object, name, {
      [name](...args) {
        const result = ReflectApply(original, this, args);
        chargeBuffer(allocatedBytes(result));
        return result;
      },
    }[name]);
  };
  // These allocate through the receiver's species, which a handler can point back at
  // the unwrapped constructor (`x.constructor = undefined`): charged by their result.
  chargeResult(TypedArrayPrototype, 'slice');
  chargeResult(TypedArrayPrototype, 'map');
  chargeResult(TypedArrayPrototype, 'filter');
  chargeResult(OriginalArrayBuffer.prototype, 'slice');
  chargeResult(TypedArrayPrototype, 'toReversed');
  chargeResult(TypedArrayPrototype, 'toSorted');
  chargeResult(TypedArrayPrototype, 'with');
  chargeResult(G.Uint8Array, 'fromBase64');
  chargeResult(G.Uint8Array, 'fromHex');
  const chargeGrowth = (prototype, name, readLength) => {
    const original = prototype[name];
    if (typeof original !== 'function') return;
    define(prototype, name, {
      [name](newLength, ...rest) {
        chargeBuffer(newLength === undefined ? readLength(this) : toLength(newLength));
        return ReflectApply(original, this, [newLength, ...rest]);
      },
    }[name]);
  };
  chargeGrowth(OriginalArrayBuffer.prototype, 'transfer', ArrayBufferByteLength);
  chargeGrowth(OriginalArrayBuffer.prototype, 'transferToFixedLength', ArrayBufferByteLength);
  chargeGrowth(OriginalArrayBuffer.prototype, 'resize', ArrayBufferByteLength);
  chargeGrowth(SharedArrayBuffer.prototype, 'grow', SharedArrayBufferByteLength);

  // Nothing may wake the context behind Python's back: no blocking waits, no
  // WebAssembly (whose memory also lives outside the heap), and mini-racer's own
  // setTimeout (built on Atomics.waitAsync) is replaced below.
  ReflectDeleteProperty(G, 'WebAssembly');
  ReflectDeleteProperty(Atomics, 'wait');
  ReflectDeleteProperty(Atomics, 'waitAsync');
  G.__timer_manager = undefined;

  // -- Bytes, UTF-8, base64 -----------------------------------------------------
  const bytesOf = (source) => {
    // A byte view of any BufferSource, or null when it is not one.
    if (isArrayBuffer(source)) return new OriginalUint8Array(source);
    if (isTypedArray(source)) {
      return new OriginalUint8Array(TypedArrayBuffer(source), TypedArrayByteOffset(source),
        TypedArrayByteLength(source));
    }
    if (isDataView(source)) {
      return new OriginalUint8Array(DataViewBuffer(source), DataViewByteOffset(source),
        DataViewByteLength(source));
    }
    return null;
  };
  const binaryToBytes = (binary) => {
    const bytes = new OriginalUint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = StringCharCodeAt(binary, i);
    return bytes;
  };
  const utf8Encode = (text) => binaryToBytes(
    Unescape(EncodeURIComponent(StringToWellFormed(StringCtor(text)))),
  );
  const codeUnitsToString = (units) => {
    let out = '';
    for (let i = 0; i < units.length; i += 8192) {
      const chunk = [];
      const end = MathMin(units.length, i + 8192);
      for (let j = i; j < end; j += 1) ArrayPush(chunk, units[j]);
      out += ReflectApply(StringFromCharCode, undefined, chunk);
    }
    return out;
  };
  // The WHATWG UTF-8 decoder: each invalid sequence becomes one U+FFFD (or, when
  // `fatal`, a TypeError).
  const utf8Decode = (bytes, fatal) => {
    // Code units are turned into text every 8192, so a 5 MB body never becomes an
    // array of millions of numbers.
    let units = [];
    let text = '';
    const flush = () => {
      text += codeUnitsToString(units);
      units = [];
    };
    let codePoint = 0;
    let needed = 0;
    let seen = 0;
    let lower = 0x80;
    let upper = 0xbf;
    const invalid = () => {
      if (fatal) throw new TypeErrorCtor('The encoded data was not valid UTF-8');
      ArrayPush(units, 0xfffd);
    };
    for (let i = 0; i < bytes.length; i += 1) {
      if (units.length >= 8192) flush();
      const byte = bytes[i];
      if (needed === 0) {
        if (byte <= 0x7f) ArrayPush(units, byte);
        else if (byte >= 0xc2 && byte <= 0xdf) {
          needed = 1;
          codePoint = byte & 0x1f;
        } else if (byte >= 0xe0 && byte <= 0xef) {
          if (byte === 0xe0) lower = 0xa0;
          if (byte === 0xed) upper = 0x9f;
          needed = 2;
          codePoint = byte & 0xf;
        } else if (byte >= 0xf0 && byte <= 0xf4) {
          if (byte === 0xf0) lower = 0x90;
          if (byte === 0xf4) upper = 0x8f;
          needed = 3;
          codePoint = byte & 0x7;
        } else invalid();
        continue;
      }
      if (byte < lower || byte > upper) {
        codePoint = 0;
        needed = 0;
        seen = 0;
        lower = 0x80;
        upper = 0xbf;
        invalid();
        i -= 1;
        continue;
      }
      lower = 0x80;
      upper = 0xbf;
      codePoint = (codePoint << 6) | (byte & 0x3f);
      seen += 1;
      if (seen === needed) {
        if (codePoint > 0xffff) {
          const offset = codePoint - 0x10000;
          ArrayPush(units, 0xd800 + (offset >> 10), 0xdc00 + (offset & 0x3ff));
        } else ArrayPush(units, codePoint);
        codePoint = 0;
        needed = 0;
        seen = 0;
      }
    }
    if (needed !== 0) invalid();
    flush();
    return text;
  };

  class DOMException extends ErrorCtor {
    constructor(message = '', name = 'Error') {
      super(StringCtor(message));
      define(this, 'name', StringCtor(name));
    }
  }

  const isAsciiWhitespace = (code) => code === 0x09 || code === 0x0a || code === 0x0c
    || code === 0x0d || code === 0x20;
  function atob(data) {
    if (arguments.length === 0) throw new TypeErrorCtor('atob requires 1 argument');
    const text = StringCtor(data);
    let compact = '';
    for (let i = 0; i < text.length; i += 1) {
      if (!isAsciiWhitespace(StringCharCodeAt(text, i))) compact += text[i];
    }
    let bytes;
    try {
      if (compact.length % 4 === 1) throw new SyntaxErrorCtor('bad length');
      bytes = fromBase64(compact);
    } catch {
      throw new DOMException('The string to be decoded is not correctly encoded.',
        'InvalidCharacterError');
    }
    return codeUnitsToString(bytes);
  }
  function btoa(data) {
    if (arguments.length === 0) throw new TypeErrorCtor('btoa requires 1 argument');
    const text = StringCtor(data);
    const bytes = new OriginalUint8Array(text.length);
    for (let i = 0; i < text.length; i += 1) {
      const code = StringCharCodeAt(text, i);
      if (code > 0xff) {
        throw new DOMException('The string to be encoded contains characters outside of the'
          + ' Latin1 range.', 'InvalidCharacterError');
      }
      bytes[i] = code;
    }
    return Uint8ArrayToBase64(bytes);
  }

  class TextEncoder {
    get encoding() {
      return 'utf-8';
    }

    encode(input = '') {
      const bytes = utf8Encode(input);
      chargeBuffer(bytes.length);
      return bytes;
    }

    encodeInto(source, destination) {
      if (TypedArrayTag(destination) !== 'Uint8Array') {
        throw new TypeErrorCtor('encodeInto needs a Uint8Array destination');
      }
      const text = StringToWellFormed(StringCtor(source));
      let read = 0;
      let written = 0;
      while (read < text.length) {
        const codePoint = StringCodePointAt(text, read);
        const units = codePoint > 0xffff ? 2 : 1;
        const encoded = utf8Encode(StringSlice(text, read, read + units));
        if (written + encoded.length > destination.length) break;
        for (let i = 0; i < encoded.length; i += 1) destination[written + i] = encoded[i];
        written += encoded.length;
        read += units;
      }
      return { read, written };
    }
  }
  const utf8Labels = ['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8',
    'x-unicode20utf8'];
  const textDecoderOptions = new WeakMapCtor();
  class TextDecoder {
    constructor(label = 'utf-8', options = {}) {
      const name = StringToLowerCase(StringCtor(label).trim());
      if (utf8Labels.indexOf(name) < 0) {
        throw new RangeErrorCtor(`The encoding "${StringCtor(label)}" is not supported`);
      }
      const settings = options === null || options === undefined ? {} : Object(options);
      WeakMapSet(textDecoderOptions, this, {
        fatal: Boolean(settings.fatal), ignoreBOM: Boolean(settings.ignoreBOM),
      });
    }

    get encoding() {
      return 'utf-8';
    }

    get fatal() {
      return WeakMapGet(textDecoderOptions, this).fatal;
    }

    get ignoreBOM() {
      return WeakMapGet(textDecoderOptions, this).ignoreBOM;
    }

    decode(input = undefined) {
      const { fatal, ignoreBOM } = WeakMapGet(textDecoderOptions, this);
      let bytes = input === undefined ? new OriginalUint8Array(0) : bytesOf(input);
      if (bytes === null) throw new TypeErrorCtor('decode needs an ArrayBuffer or a view of one');
      if (!ignoreBOM && bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb
        && bytes[2] === 0xbf) {
        bytes = bytes.subarray(3);
      }
      return utf8Decode(bytes, fatal);
    }
  }

  // -- URL and URLSearchParams (WHATWG URL Standard, minus IDNA mapping) --------
  const specialPorts = ObjectCreate(null);
  specialPorts.ftp = '21';
  specialPorts.file = '';
  specialPorts.http = '80';
  specialPorts.https = '443';
  specialPorts.ws = '80';
  specialPorts.wss = '443';
  const isSpecial = (scheme) => scheme in specialPorts;
  const c0Set = (c) => c < 0x20 || c > 0x7e;
  const fragmentSet = (c) => c0Set(c) || c === 0x20 || c === 0x22 || c === 0x3c || c === 0x3e
    || c === 0x60;
  const querySet = (c) => c0Set(c) || c === 0x20 || c === 0x22 || c === 0x23 || c === 0x3c
    || c === 0x3e;
  const specialQuerySet = (c) => querySet(c) || c === 0x27;
  const pathSet = (c) => querySet(c) || c === 0x3f || c === 0x5e || c === 0x60 || c === 0x7b
    || c === 0x7d;
  const userinfoSet = (c) => pathSet(c) || c === 0x2f || c === 0x3a || c === 0x3b || c === 0x3d
    || c === 0x40 || (c >= 0x5b && c <= 0x5e) || c === 0x7c;
  const componentSet = (c) => userinfoSet(c) || (c >= 0x24 && c <= 0x26) || c === 0x2b
    || c === 0x2c;
  const formSet = (c) => componentSet(c) || c === 0x21 || (c >= 0x27 && c <= 0x29) || c === 0x7e;
  const hexByte = (byte) => (byte < 16 ? '%0' : '%') + byte.toString(16).toUpperCase();

  const percentEncode = (text, inSet, spaceAsPlus = false) => {
    const bytes = utf8Encode(text);
    let out = '';
    for (let i = 0; i < bytes.length; i += 1) {
      const byte = bytes[i];
      if (spaceAsPlus && byte === 0x20) out += '+';
      else if (inSet(byte)) out += hexByte(byte);
      else out += StringFromCharCode(byte);
    }
    return out;
  };
  const isHexDigit = (code) => (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x46)
    || (code >= 0x61 && code <= 0x66);
  const percentDecode = (text) => {
    const bytes = utf8Encode(text);
    const out = [];
    for (let i = 0; i < bytes.length; i += 1) {
      if (bytes[i] === 0x25 && i + 2 < bytes.length && isHexDigit(bytes[i + 1])
        && isHexDigit(bytes[i + 2])) {
        ArrayPush(out, parseInt(StringFromCharCode(bytes[i + 1], bytes[i + 2]), 16));
        i += 2;
      } else ArrayPush(out, bytes[i]);
    }
    return utf8Decode(out, false);
  };

  const punycodeDigit = (d) => StringFromCharCode(d < 26 ? 97 + d : 22 + d);
  const punycodeAdapt = (delta, points, first) => {
    let scaled = first ? MathFloor(delta / 700) : delta >> 1;
    scaled += MathFloor(scaled / points);
    let k = 0;
    while (scaled > 455) {
      scaled = MathFloor(scaled / 35);
      k += 36;
    }
    return k + MathFloor((36 * scaled) / (scaled + 38));
  };
  const punycodeEncode = (label) => {
    const points = [];
    for (let i = 0; i < label.length; i += 1) {
      const codePoint = StringCodePointAt(label, i);
      if (codePoint > 0xffff) i += 1;
      ArrayPush(points, codePoint);
    }
    let out = '';
    for (let i = 0; i < points.length; i += 1) {
      if (points[i] < 0x80) out += StringFromCharCode(points[i]);
    }
    const basic = out.length;
    let handled = basic;
    if (basic > 0) out += '-';
    let n = 0x80;
    let delta = 0;
    let bias = 72;
    while (handled < points.length) {
      let next = Infinity;
      for (let i = 0; i < points.length; i += 1) {
        if (points[i] >= n && points[i] < next) next = points[i];
      }
      delta += (next - n) * (handled + 1);
      n = next;
      for (let i = 0; i < points.length; i += 1) {
        if (points[i] < n) delta += 1;
        if (points[i] === n) {
          let q = delta;
          for (let k = 36; ; k += 36) {
            const t = k <= bias ? 1 : (k >= bias + 26 ? 26 : k - bias);
            if (q < t) break;
            out += punycodeDigit(t + ((q - t) % (36 - t)));
            q = MathFloor((q - t) / (36 - t));
          }
          out += punycodeDigit(q);
          bias = punycodeAdapt(delta, handled + 1, handled === basic);
          delta = 0;
          handled += 1;
        }
      }
      delta += 1;
      n += 1;
    }
    return out;
  };
  const domainToAscii = (domain) => {
    const lowered = StringToLowerCase(domain.normalize('NFC'));
    if (!RegExpTest(/[^\x00-\x7f]/, lowered)) return lowered;
    const labels = StringSplit(lowered, '.');
    for (let i = 0; i < labels.length; i += 1) {
      if (RegExpTest(/[^\x00-\x7f]/, labels[i])) labels[i] = `xn--${punycodeEncode(labels[i])}`;
    }
    return ArrayJoin(labels, '.');
  };

  const parseIPv4Number = (text) => {
    if (text === '') return null;
    let digits = text;
    let radix = 10;
    if (digits.length >= 2 && (StringSlice(digits, 0, 2) === '0x'
      || StringSlice(digits, 0, 2) === '0X')) {
      digits = StringSlice(digits, 2);
      radix = 16;
    } else if (digits.length >= 2 && digits[0] === '0') {
      digits = StringSlice(digits, 1);
      radix = 8;
    }
    if (digits === '') return 0;
    const valid = radix === 10 ? /^[0-9]+$/ : (radix === 16 ? /^[0-9a-fA-F]+$/ : /^[0-7]+$/);
    return RegExpTest(valid, digits) ? parseInt(digits, radix) : null;
  };
  const endsInNumber = (host) => {
    const parts = StringSplit(host, '.');
    if (parts[parts.length - 1] === '') {
      if (parts.length === 1) return false;
      parts.pop();
    }
    const last = parts[parts.length - 1];
    return RegExpTest(/^[0-9]+$/, last) || RegExpTest(/^0[xX][0-9a-fA-F]*$/, last);
  };
  const parseIPv4 = (host) => {
    const parts = StringSplit(host, '.');
    if (parts[parts.length - 1] === '' && parts.length > 1) parts.pop();
    if (parts.length > 4) return null;
    const numbers = [];
    for (let i = 0; i < parts.length; i += 1) {
      const number = parseIPv4Number(parts[i]);
      if (number === null) return null;
      ArrayPush(numbers, number);
    }
    for (let i = 0; i < numbers.length - 1; i += 1) if (numbers[i] > 255) return null;
    if (numbers[numbers.length - 1] >= 256 ** (5 - numbers.length)) return null;
    let address = numbers[numbers.length - 1];
    for (let i = 0; i < numbers.length - 1; i += 1) address += numbers[i] * 256 ** (3 - i);
    const octets = [];
    for (let i = 3; i >= 0; i -= 1) ArrayPush(octets, MathFloor(address / 256 ** i) % 256);
    return ArrayJoin(octets, '.');
  };
  const parseIPv6 = (input) => {
    const address = [0, 0, 0, 0, 0, 0, 0, 0];
    let pieceIndex = 0;
    let compress = null;
    let p = 0;
    const isDigit = (c) => c !== undefined && c >= '0' && c <= '9';
    const isHex = (c) => c !== undefined && isHexDigit(StringCharCodeAt(c, 0));
    if (input[p] === ':') {
      if (input[p + 1] !== ':') return null;
      p += 2;
      pieceIndex += 1;
      compress = pieceIndex;
    }
    while (p < input.length) {
      if (pieceIndex === 8) return null;
      if (input[p] === ':') {
        if (compress !== null) return null;
        p += 1;
        pieceIndex += 1;
        compress = pieceIndex;
        continue;
      }
      let value = 0;
      let length = 0;
      while (length < 4 && isHex(input[p])) {
        value = value * 16 + parseInt(input[p], 16);
        p += 1;
        length += 1;
      }
      if (input[p] === '.') {
        if (length === 0) return null;
        p -= length;
        if (pieceIndex > 6) return null;
        let numbersSeen = 0;
        while (p < input.length) {
          let ipv4Piece = null;
          if (numbersSeen > 0) {
            if (input[p] === '.' && numbersSeen < 4) p += 1;
            else return null;
          }
          if (!isDigit(input[p])) return null;
          while (isDigit(input[p])) {
            const number = +input[p];
            if (ipv4Piece === null) ipv4Piece = number;
            else if (ipv4Piece === 0) return null;
            else ipv4Piece = ipv4Piece * 10 + number;
            if (ipv4Piece > 255) return null;
            p += 1;
          }
          address[pieceIndex] = address[pieceIndex] * 256 + ipv4Piece;
          numbersSeen += 1;
          if (numbersSeen === 2 || numbersSeen === 4) pieceIndex += 1;
        }
        if (numbersSeen !== 4) return null;
        break;
      } else if (input[p] === ':') {
        p += 1;
        if (p >= input.length) return null;
      } else if (p < input.length) return null;
      address[pieceIndex] = value;
      pieceIndex += 1;
    }
    if (compress !== null) {
      let swaps = pieceIndex - compress;
      pieceIndex = 7;
      while (pieceIndex !== 0 && swaps > 0) {
        const other = compress + swaps - 1;
        const held = address[pieceIndex];
        address[pieceIndex] = address[other];
        address[other] = held;
        pieceIndex -= 1;
        swaps -= 1;
      }
    } else if (pieceIndex !== 8) return null;
    return address;
  };
  const serializeIPv6 = (address) => {
    let compress = null;
    let bestLength = 1;
    for (let i = 0; i < 8;) {
      if (address[i] !== 0) {
        i += 1;
        continue;
      }
      let end = i;
      while (end < 8 && address[end] === 0) end += 1;
      if (end - i > bestLength) {
        compress = i;
        bestLength = end - i;
      }
      i = end;
    }
    let out = '';
    let ignoreZero = false;
    for (let i = 0; i < 8; i += 1) {
      if (ignoreZero && address[i] === 0) continue;
      ignoreZero = false;
      if (compress === i) {
        out += i === 0 ? '::' : ':';
        ignoreZero = true;
        continue;
      }
      out += address[i].toString(16);
      if (i !== 7) out += ':';
    }
    return out;
  };
  const forbiddenHost = /[\u0000\t\n\r #/:<>?@[\\\]^|]/;
  const forbiddenDomain = /[\u0000-\u0020#%/:<>?@[\\\]^|\u007f]/;
  const parseHost = (input, opaque) => {
    if (input[0] === '[') {
      if (input[input.length - 1] !== ']') return null;
      const address = parseIPv6(StringSlice(input, 1, -1));
      return address === null ? null : `[${serializeIPv6(address)}]`;
    }
    if (opaque) return RegExpTest(forbiddenHost, input) ? null : percentEncode(input, c0Set);
    const ascii = domainToAscii(percentDecode(input));
    if (ascii === '' || RegExpTest(forbiddenDomain, ascii)) return null;
    return endsInNumber(ascii) ? parseIPv4(ascii) : ascii;
  };
  const parsePort = (text, scheme) => {
    if (text === '') return '';
    if (!RegExpTest(/^[0-9]+$/, text)) return null;
    const number = +text;
    if (number > 65535) return null;
    return StringCtor(number) === specialPorts[scheme] ? '' : StringCtor(number);
  };

  const isSingleDot = (segment) => segment === '.' || StringToLowerCase(segment) === '%2e';
  const isDoubleDot = (segment) => {
    const lowered = StringToLowerCase(segment);
    return lowered === '..' || lowered === '.%2e' || lowered === '%2e.' || lowered === '%2e%2e';
  };
  const appendPath = (path, input, special) => {
    let rest = input;
    if (rest !== '' && (rest[0] === '/' || (special && rest[0] === '\\'))) rest = StringSlice(rest, 1);
    const pieces = StringSplit(rest, special ? /[/\\]/ : '/');
    for (let i = 0; i < pieces.length; i += 1) {
      const piece = pieces[i];
      const last = i === pieces.length - 1;
      if (isDoubleDot(piece)) {
        if (path.length > 0) path.pop();
        if (last) ArrayPush(path, '');
      } else if (isSingleDot(piece)) {
        if (last) ArrayPush(path, '');
      } else ArrayPush(path, percentEncode(piece, pathSet));
    }
  };
  const splitTail = (text) => {
    let rest = text;
    let query = null;
    let fragment = null;
    const hash = StringIndexOf(rest, '#');
    if (hash >= 0) {
      fragment = StringSlice(rest, hash + 1);
      rest = StringSlice(rest, 0, hash);
    }
    const question = StringIndexOf(rest, '?');
    if (question >= 0) {
      query = StringSlice(rest, question + 1);
      rest = StringSlice(rest, 0, question);
    }
    return { path: rest, query, fragment };
  };
  const encodeQuery = (query, special) => (query === null ? null
    : percentEncode(query, special ? specialQuerySet : querySet));
  const encodeFragment = (fragment) => (fragment === null ? null
    : percentEncode(fragment, fragmentSet));
  const newRecord = (scheme) => ({
    scheme, username: '', password: '', host: null, port: '', path: [], opaquePath: null,
    query: null, fragment: null,
  });
  const copyRecord = (record) => ({ ...record, path: record.path.slice() });
  const finishRecord = (record, tail, special) => {
    const parts = splitTail(tail);
    if (special || parts.path !== '') appendPath(record.path, parts.path, special);
    record.query = encodeQuery(parts.query, special);
    record.fragment = encodeFragment(parts.fragment);
    return record;
  };
  const splitHostPort = (authority) => {
    if (authority[0] === '[') {
      const close = StringIndexOf(authority, ']');
      if (close < 0) return null;
      const after = StringSlice(authority, close + 1);
      if (after !== '' && after[0] !== ':') return null;
      return { host: StringSlice(authority, 0, close + 1), port: after === '' ? null : StringSlice(after, 1) };
    }
    const colon = StringIndexOf(authority, ':');
    if (colon < 0) return { host: authority, port: null };
    return { host: StringSlice(authority, 0, colon), port: StringSlice(authority, colon + 1) };
  };
  const authorityEnd = (text, special) => {
    for (let i = 0; i < text.length; i += 1) {
      const c = text[i];
      if (c === '/' || c === '?' || c === '#' || (special && c === '\\')) return i;
    }
    return text.length;
  };
  const parseAuthority = (scheme, rest) => {
    const special = isSpecial(scheme);
    const end = authorityEnd(rest, special);
    let authority = StringSlice(rest, 0, end);
    const record = newRecord(scheme);
    const at = authority.lastIndexOf('@');
    if (at >= 0) {
      const userinfo = StringSlice(authority, 0, at);
      authority = StringSlice(authority, at + 1);
      const colon = StringIndexOf(userinfo, ':');
      record.username = percentEncode(colon >= 0 ? StringSlice(userinfo, 0, colon) : userinfo,
        userinfoSet);
      record.password = colon >= 0 ? percentEncode(StringSlice(userinfo, colon + 1), userinfoSet) : '';
      if (authority === '') return null;
    }
    const hostPort = splitHostPort(authority);
    if (hostPort === null) return null;
    if (hostPort.host === '') {
      if ((special && scheme !== 'file') || at >= 0
        || (hostPort.port !== null && hostPort.port !== '')) return null;
      record.host = '';
    } else {
      record.host = parseHost(hostPort.host, !special);
      if (record.host === null) return null;
    }
    if (hostPort.port !== null) {
      record.port = parsePort(hostPort.port, scheme);
      if (record.port === null) return null;
    }
    if (scheme === 'file' && record.host === 'localhost') record.host = '';
    return finishRecord(record, StringSlice(rest, end), special);
  };
  const isSlash = (c, special) => c === '/' || (special && c === '\\');
  const parseRelative = (rest, base) => {
    const special = isSpecial(base.scheme);
    const record = copyRecord(base);
    record.fragment = null;
    if (rest === '') return record;
    if (isSlash(rest[0], special) && isSlash(rest[1], special)) {
      return parseAuthority(base.scheme, special ? rest.replace(/^[/\\]+/, '') : StringSlice(rest, 2));
    }
    const parts = splitTail(rest);
    if (isSlash(rest[0], special)) {
      // A file URL's drive letter survives a path-absolute reference (file slash state).
      const drive = base.scheme === 'file' && base.path.length > 0
        && RegExpTest(/^[A-Za-z]:$/, base.path[0])
        && !RegExpTest(/^[A-Za-z][:|](?:$|[/\\?#])/, StringSlice(parts.path, 1));
      record.path = drive ? [base.path[0]] : [];
    } else if (rest[0] !== '?' && rest[0] !== '#') {
      if (record.path.length > 0) record.path.pop();
    }
    if (parts.path !== '') appendPath(record.path, parts.path, special);
    if (rest[0] !== '#') record.query = encodeQuery(parts.query, special);
    record.fragment = encodeFragment(parts.fragment);
    return record;
  };
  const trimUrlInput = (input) => input.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '')
    .replace(/[\t\n\r]/g, '');
  const parseURL = (input, base) => {
    const text = trimUrlInput(input);
    const schemeMatch = /^([A-Za-z][A-Za-z0-9+\-.]*):/.exec(text);
    if (schemeMatch) {
      const scheme = StringToLowerCase(schemeMatch[1]);
      const rest = StringSlice(text, schemeMatch[0].length);
      const special = isSpecial(scheme);
      if (special) {
        const twoSlashes = isSlash(rest[0], true) && isSlash(rest[1], true);
        if (base && base.scheme === scheme && !twoSlashes) return parseRelative(rest, base);
        if (scheme === 'file') {
          if (twoSlashes) return parseAuthority(scheme, StringSlice(rest, 2));
          const record = newRecord('file');
          record.host = '';
          return finishRecord(record, rest, true);
        }
        return parseAuthority(scheme, rest.replace(/^[/\\]+/, ''));
      }
      if (StringSlice(rest, 0, 2) === '//') return parseAuthority(scheme, StringSlice(rest, 2));
      const record = newRecord(scheme);
      if (rest[0] === '/') return finishRecord(record, rest, false);
      const parts = splitTail(rest);
      record.opaquePath = percentEncode(parts.path, c0Set);
      record.query = encodeQuery(parts.query, false);
      record.fragment = encodeFragment(parts.fragment);
      return record;
    }
    if (base === null) return null;
    if (base.opaquePath !== null) {
      if (text[0] !== '#') return null;
      const record = copyRecord(base);
      record.fragment = encodeFragment(StringSlice(text, 1));
      return record;
    }
    return parseRelative(text, base);
  };
  const originOf = (record) => {
    if (record.scheme === 'blob' && record.opaquePath !== null) {
      // A blob URL's origin is the origin of the URL it wraps (http and https only).
      const inner = parseURL(record.opaquePath, null);
      return inner !== null && (inner.scheme === 'http' || inner.scheme === 'https')
        ? originOf(inner) : 'null';
    }
    if (!isSpecial(record.scheme) || record.scheme === 'file') return 'null';
    return `${record.scheme}://${record.host}${record.port === '' ? '' : `:${record.port}`}`;
  };
  const pathString = (record) => (record.opaquePath !== null ? record.opaquePath
    : ArrayJoin(ArrayMap(record.path, (segment) => `/${segment}`), ''));
  const serializeURL = (record) => {
    let out = `${record.scheme}:`;
    if (record.host !== null) {
      out += '//';
      if (record.username !== '' || record.password !== '') {
        out += record.username;
        if (record.password !== '') out += `:${record.password}`;
        out += '@';
      }
      out += record.host;
      if (record.port !== '') out += `:${record.port}`;
    } else if (record.opaquePath === null && record.path.length > 1 && record.path[0] === '') {
      out += '/.';
    }
    out += pathString(record);
    if (record.query !== null) out += `?${record.query}`;
    if (record.fragment !== null) out += `#${record.fragment}`;
    return out;
  };

  const parseForm = (text) => {
    const list = [];
    const pieces = StringSplit(text, '&');
    for (let i = 0; i < pieces.length; i += 1) {
      const piece = pieces[i];
      if (piece === '') continue;
      const equals = StringIndexOf(piece, '=');
      const name = equals >= 0 ? StringSlice(piece, 0, equals) : piece;
      const value = equals >= 0 ? StringSlice(piece, equals + 1) : '';
      ArrayPush(list, [percentDecode(name.replace(/\+/g, ' ')),
        percentDecode(value.replace(/\+/g, ' '))]);
    }
    return list;
  };
  const serializeForm = (list) => ArrayJoin(ArrayMap(list, (pair) => (
    `${percentEncode(pair[0], formSet, true)}=${percentEncode(pair[1], formSet, true)}`)), '&');

  const urlRecords = new WeakMapCtor();
  const urlParams = new WeakMapCtor();
  const paramsState = new WeakMapCtor();
  const recordOf = (url) => {
    const record = WeakMapGet(urlRecords, url);
    if (record === undefined) throw new TypeErrorCtor('Illegal invocation');
    return record;
  };
  const stateOf = (params) => {
    const state = WeakMapGet(paramsState, params);
    if (state === undefined) throw new TypeErrorCtor('Illegal invocation');
    return state;
  };
  const paramsChanged = (state) => {
    if (state.url === null) return;
    const serialized = serializeForm(state.list);
    recordOf(state.url).query = serialized === '' ? null : serialized;
  };

  class URLSearchParams {
    constructor(init = '') {
      let list = [];
      if (init !== null && (typeof init === 'object' || typeof init === 'function')) {
        if (typeof init[SymbolIterator] === 'function') {
          for (const pair of init) {
            const entry = toPlainArray(pair);
            if (entry.length !== 2) {
              throw new TypeErrorCtor('Each URLSearchParams pair needs exactly two items');
            }
            ArrayPush(list, [StringCtor(entry[0]), StringCtor(entry[1])]);
          }
        } else {
          const keys = ReflectOwnKeys(init);
          for (let i = 0; i < keys.length; i += 1) {
            const key = keys[i];
            const descriptor = ReflectGetOwnPropertyDescriptor(init, key);
            if (typeof key === 'string' && descriptor && descriptor.enumerable) {
              ArrayPush(list, [key, StringCtor(init[key])]);
            }
          }
        }
      } else {
        const text = StringCtor(init);
        list = parseForm(text[0] === '?' ? StringSlice(text, 1) : text);
      }
      WeakMapSet(paramsState, this, { list, url: null });
    }

    get size() {
      return stateOf(this).list.length;
    }

    append(name, value) {
      const state = stateOf(this);
      ArrayPush(state.list, [StringCtor(name), StringCtor(value)]);
      paramsChanged(state);
    }

    delete(name, value = undefined) {
      const state = stateOf(this);
      const key = StringCtor(name);
      const match = value === undefined ? null : StringCtor(value);
      state.list = ArrayFilter(state.list, (pair) => !(pair[0] === key
        && (match === null || pair[1] === match)));
      paramsChanged(state);
    }

    get(name) {
      const key = StringCtor(name);
      const found = stateOf(this).list.find((pair) => pair[0] === key);
      return found === undefined ? null : found[1];
    }

    getAll(name) {
      const key = StringCtor(name);
      return ArrayMap(ArrayFilter(stateOf(this).list, (pair) => pair[0] === key), (pair) => pair[1]);
    }

    has(name, value = undefined) {
      const key = StringCtor(name);
      const match = value === undefined ? null : StringCtor(value);
      return stateOf(this).list.some((pair) => pair[0] === key
        && (match === null || pair[1] === match));
    }

    set(name, value) {
      const state = stateOf(this);
      const key = StringCtor(name);
      const first = state.list.findIndex((pair) => pair[0] === key);
      if (first < 0) ArrayPush(state.list, [key, StringCtor(value)]);
      else {
        state.list[first] = [key, StringCtor(value)];
        state.list = ArrayFilter(state.list, (pair, index) => index <= first || pair[0] !== key);
      }
      paramsChanged(state);
    }

    sort() {
      const state = stateOf(this);
      const indexed = ArrayMap(state.list, (pair, index) => [pair, index]);
      ArraySort(indexed, (a, b) => {
        if (a[0][0] < b[0][0]) return -1;
        if (a[0][0] > b[0][0]) return 1;
        return a[1] - b[1];
      });
      state.list = ArrayMap(indexed, (item) => item[0]);
      paramsChanged(state);
    }

    forEach(callback, thisArg = undefined) {
      const state = stateOf(this);
      for (let i = 0; i < state.list.length; i += 1) {
        ReflectApply(callback, thisArg, [state.list[i][1], state.list[i][0], this]);
      }
    }

    * entries() {
      const state = stateOf(this);
      for (let i = 0; i < state.list.length; i += 1) yield [state.list[i][0], state.list[i][1]];
    }

    * keys() {
      for (const pair of this.entries()) yield pair[0];
    }

    * values() {
      for (const pair of this.entries()) yield pair[1];
    }

    [SymbolIterator]() {
      return this.entries();
    }

    toString() {
      return serializeForm(stateOf(this).list);
    }
  }

  const setRecord = (url, record) => {
    WeakMapSet(urlRecords, url, record);
    stateOf(WeakMapGet(urlParams, url)).list = parseForm(record.query === null ? '' : record.query);
  };
  const hostSetter = (url, value, withPort) => {
    const record = recordOf(url);
    if (record.opaquePath !== null) return;
    const special = isSpecial(record.scheme);
    const text = StringCtor(value);
    const hostPort = splitHostPort(StringSlice(text, 0, authorityEnd(text, special)));
    if (hostPort === null || (special && hostPort.host === '')) return;
    const host = parseHost(hostPort.host, !special);
    if (host === null) return;
    let port = record.port;
    if (withPort && hostPort.port !== null && hostPort.port !== '') {
      port = parsePort(hostPort.port, record.scheme);
      if (port === null) return;
    }
    record.host = host;
    record.port = port;
  };
  const cannotHaveCredentials = (record) => record.host === null || record.host === ''
    || record.scheme === 'file';

  class URL {
    constructor(url, base = undefined) {
      let baseRecord = null;
      if (base !== undefined) {
        baseRecord = parseURL(StringCtor(base), null);
        if (baseRecord === null) throw new TypeErrorCtor('Invalid base URL');
      }
      const record = parseURL(StringCtor(url), baseRecord);
      if (record === null) throw new TypeErrorCtor('Invalid URL');
      WeakMapSet(urlRecords, this, record);
      const params = new URLSearchParams(record.query === null ? '' : record.query);
      stateOf(params).url = this;
      WeakMapSet(urlParams, this, params);
    }

    static canParse(url, base = undefined) {
      try {
        return Boolean(new URL(url, base));
      } catch {
        return false;
      }
    }

    static parse(url, base = undefined) {
      try {
        return new URL(url, base);
      } catch {
        return null;
      }
    }

    get href() {
      return serializeURL(recordOf(this));
    }

    set href(value) {
      recordOf(this);
      const record = parseURL(StringCtor(value), null);
      if (record === null) throw new TypeErrorCtor('Invalid URL');
      setRecord(this, record);
    }

    get origin() {
      return originOf(recordOf(this));
    }

    get protocol() {
      return `${recordOf(this).scheme}:`;
    }

    set protocol(value) {
      const record = recordOf(this);
      const match = /^([A-Za-z][A-Za-z0-9+\-.]*)(?::|$)/.exec(StringCtor(value));
      if (match === null) return;
      const scheme = StringToLowerCase(match[1]);
      if (isSpecial(scheme) !== isSpecial(record.scheme)) return;
      if (scheme === 'file' && (record.username !== '' || record.password !== ''
        || record.port !== '')) return;
      if (record.scheme === 'file' && record.host === '') return;
      record.scheme = scheme;
      if (record.port === specialPorts[scheme]) record.port = '';
    }

    get username() {
      return recordOf(this).username;
    }

    set username(value) {
      const record = recordOf(this);
      if (!cannotHaveCredentials(record)) record.username = percentEncode(StringCtor(value), userinfoSet);
    }

    get password() {
      return recordOf(this).password;
    }

    set password(value) {
      const record = recordOf(this);
      if (!cannotHaveCredentials(record)) record.password = percentEncode(StringCtor(value), userinfoSet);
    }

    get host() {
      const record = recordOf(this);
      if (record.host === null) return '';
      return record.port === '' ? record.host : `${record.host}:${record.port}`;
    }

    set host(value) {
      hostSetter(this, value, true);
    }

    get hostname() {
      const record = recordOf(this);
      return record.host === null ? '' : record.host;
    }

    set hostname(value) {
      hostSetter(this, value, false);
    }

    get port() {
      return recordOf(this).port;
    }

    set port(value) {
      const record = recordOf(this);
      if (cannotHaveCredentials(record)) return;
      const text = StringCtor(value);
      if (text === '') {
        record.port = '';
        return;
      }
      const digits = /^[0-9]+/.exec(text);
      if (digits === null) return;
      const port = parsePort(digits[0], record.scheme);
      if (port !== null) record.port = port;
    }

    get pathname() {
      return pathString(recordOf(this));
    }

    set pathname(value) {
      const record = recordOf(this);
      if (record.opaquePath !== null) return;
      record.path = [];
      appendPath(record.path, StringCtor(value), isSpecial(record.scheme));
    }

    get search() {
      const { query } = recordOf(this);
      return query === null || query === '' ? '' : `?${query}`;
    }

    set search(value) {
      const record = recordOf(this);
      let text = StringCtor(value);
      if (text[0] === '?') text = StringSlice(text, 1);
      record.query = text === '' ? null : encodeQuery(text, isSpecial(record.scheme));
      stateOf(WeakMapGet(urlParams, this)).list = parseForm(text);
    }

    get searchParams() {
      recordOf(this);
      return WeakMapGet(urlParams, this);
    }

    get hash() {
      const { fragment } = recordOf(this);
      return fragment === null || fragment === '' ? '' : `#${fragment}`;
    }

    set hash(value) {
      const record = recordOf(this);
      let text = StringCtor(value);
      if (text[0] === '#') text = StringSlice(text, 1);
      record.fragment = text === '' ? null : encodeFragment(text);
    }

    toString() {
      return this.href;
    }

    toJSON() {
      return this.href;
    }
  }

  // -- crypto: a ChaCha20 keystream (RFC 8439) keyed with fresh host entropy ---
  const chachaKey = new OriginalUint32Array(8);
  for (let i = 0; i < 8; i += 1) {
    const hex = StringSlice(config.randomKey, i * 8, i * 8 + 8);
    // Key words are little-endian.
    chachaKey[i] = parseInt(StringSlice(hex, 6, 8) + StringSlice(hex, 4, 6) + StringSlice(hex, 2, 4)
      + StringSlice(hex, 0, 2), 16);
  }
  const chachaNonce = new OriginalUint32Array(3);
  const chachaScratch = new OriginalUint32Array(32);
  const chachaBlock = new OriginalUint8Array(64);
  let chachaCounter = 0;
  let chachaUsed = 64;
  const refillKeystream = () => {
    chacha20Block(chachaKey, chachaCounter, chachaNonce, chachaBlock, chachaScratch);
    chachaCounter += 1;
    chachaUsed = 0;
  };
  const randomBytes = (bytes) => {
    for (let i = 0; i < bytes.length; i += 1) {
      if (chachaUsed === 64) refillKeystream();
      bytes[i] = chachaBlock[chachaUsed];
      chachaUsed += 1;
    }
  };
  const integerArrayTags = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array',
    'Uint16Array', 'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array'];
  const digestNames = ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512'];

  const crypto = {
    getRandomValues(array) {
      const tag = isTypedArray(array) ? TypedArrayTag(array) : undefined;
      if (integerArrayTags.indexOf(tag) < 0) {
        throw new DOMException('getRandomValues needs an integer typed array', 'TypeMismatchError');
      }
      const byteLength = TypedArrayByteLength(array);
      if (byteLength > 65536) {
        throw new DOMException('getRandomValues can fill at most 65536 bytes at a time',
          'QuotaExceededError');
      }
      randomBytes(new OriginalUint8Array(TypedArrayBuffer(array), TypedArrayByteOffset(array),
        byteLength));
      return array;
    },
    randomUUID() {
      const bytes = new OriginalUint8Array(16);
      randomBytes(bytes);
      bytes[6] = (bytes[6] & 0x0f) | 0x40;
      bytes[8] = (bytes[8] & 0x3f) | 0x80;
      let hex = '';
      for (let i = 0; i < 16; i += 1) {
        hex += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
        if (i === 3 || i === 5 || i === 7 || i === 9) hex += '-';
      }
      return hex;
    },
    subtle: {
      digest(algorithm, data) {
        const name = StringCtor(algorithm !== null && typeof algorithm === 'object'
          ? algorithm.name : algorithm).toUpperCase();
        if (digestNames.indexOf(name) < 0) {
          return PromiseReject(new DOMException(`Unsupported digest algorithm: ${name}`,
            'NotSupportedError'));
        }
        const bytes = bytesOf(data);
        if (bytes === null) {
          return PromiseReject(new TypeErrorCtor('digest needs an ArrayBuffer or a view of one'));
        }
        return PromiseThen(queueHostOp({ op: 'digest', algorithm: name,
          data: Uint8ArrayToBase64(bytes) }), (encoded) => {
          const digest = fromBase64(encoded);
          return digest.buffer;
        });
      },
    },
  };

  // -- console: captured for the caller, never printed ---------------------------
  const consoleLimit = config.maxConsoleBytes;
  let consoleText = '';
  let consoleSize = 0;
  let consoleCut = false;
  const describeFunction = (fn) => {
    let source = '';
    try {
      source = FunctionToString(fn);
    } catch {
      // A revoked proxy, for instance.
    }
    const name = typeof fn.name === 'string' && fn.name !== '' ? fn.name : '(anonymous)';
    return StringSlice(source, 0, 6) === 'class ' ? `[class ${name}]` : `[Function: ${name}]`;
  };
  const formatValue = (value, depth, seen) => {
    switch (typeof value) {
      case 'string':
        return depth === 0 ? value : JSONStringify(value);
      case 'bigint':
        return `${value}n`;
      case 'symbol':
        return value.toString();
      case 'function':
        return describeFunction(value);
      case 'object':
        break;
      default:
        return StringCtor(value);
    }
    if (value === null) return 'null';
    if (WeakSetHas(seen, value)) return '[Circular]';
    if (value instanceof ErrorCtor) {
      const summary = `${value.name}: ${value.message}`;
      return depth === 0 && typeof value.stack === 'string' ? value.stack : `[${summary}]`;
    }
    if (value instanceof Date) return value.toISOString();
    if (value instanceof URL) return `URL ${value.href}`;
    if (depth > 2) return ArrayIsArray(value) ? '[Array]' : '[Object]';
    WeakSetAdd(seen, value);
    if (ArrayIsArray(value)) {
      const shown = MathMin(value.length, 100);
      const items = [];
      for (let i = 0; i < shown; i += 1) ArrayPush(items, formatValue(value[i], depth + 1, seen));
      if (value.length > shown) ArrayPush(items, `... ${value.length - shown} more items`);
      return items.length === 0 ? '[]' : `[ ${ArrayJoin(items, ', ')} ]`;
    }
    if (value instanceof MapCtor) return `Map(${value.size})`;
    if (value instanceof Set) return `Set(${value.size})`;
    const keys = Object.keys(value);
    const shown = MathMin(keys.length, 100);
    const items = [];
    for (let i = 0; i < shown; i += 1) {
      const key = keys[i];
      const label = RegExpTest(/^[A-Za-z_$][\w$]*$/, key) ? key : JSONStringify(key);
      ArrayPush(items, `${label}: ${formatValue(value[key], depth + 1, seen)}`);
    }
    if (keys.length > shown) ArrayPush(items, `... ${keys.length - shown} more keys`);
    return items.length === 0 ? '{}' : `{ ${ArrayJoin(items, ', ')} }`;
  };
  const writeConsole = (prefix, args) => {
    if (consoleCut) return;
    let line = prefix;
    for (let i = 0; i < args.length; i += 1) {
      let text;
      try {
        text = formatValue(args[i], 0, new WeakSetCtor());
      } catch {
        text = '[unprintable]';
      }
      line += (i === 0 ? '' : ' ') + text;
      if (line.length > consoleLimit) break;
    }
    line += '\n';
    // UTF-16 units never outnumber UTF-8 bytes, so this cap is generous;
    // Python applies the exact byte limit.
    if (consoleSize + line.length > consoleLimit) {
      line = StringSlice(line, 0, consoleLimit - consoleSize);
      consoleCut = true;
    }
    consoleText += line;
    consoleSize += line.length;
  };
  const consoleObject = ObjectCreate(null);
  const consoleMethods = [['log', ''], ['info', ''], ['debug', ''], ['dir', ''], ['trace', ''],
    ['warn', '[warn] '], ['error', '[error] ']];
  for (let i = 0; i < consoleMethods.length; i += 1) {
    const prefix = consoleMethods[i][1];
    define(consoleObject, consoleMethods[i][0], (...args) => writeConsole(prefix, args));
  }
  define(consoleObject, 'assert', (condition, ...args) => {
    if (!condition) {
      writeConsole(args.length ? '[error] Assertion failed: ' : '[error] Assertion failed', args);
    }
  });

  // -- Handler outcome -----------------------------------------------------------
  let outcome = null;
  const firstLine = (text) => {
    const newline = StringIndexOf(text, '\n');
    return newline < 0 ? text : StringSlice(text, 0, newline);
  };
  const clip = (text) => (text.length > 1000 ? `${StringSlice(text, 0, 1000)}...` : text);
  const describeError = (error) => {
    try {
      if (error !== null && typeof error === 'object' && WeakSetHas(memoryErrors, error)) {
        return 'memory limit exceeded';
      }
      if (error !== null && typeof error === 'object' && typeof error.message === 'string') {
        const name = typeof error.name === 'string' && error.name !== '' ? error.name : 'Error';
        return clip(StringToWellFormed(error.message === '' ? name : `${name}: ${error.message}`));
      }
      let shown;
      try {
        shown = typeof error === 'string' ? JSONStringify(error) : formatValue(error, 1, new WeakSetCtor());
      } catch {
        shown = 'a value that cannot be shown';
      }
      return clip(StringToWellFormed(`Uncaught ${shown}`));
    } catch {
      return 'Uncaught exception';
    }
  };
  const fail = (error) => {
    if (outcome !== null) return;
    const failure = ObjectCreate(null);
    failure.ok = false;
    failure.error = describeError(error);
    outcome = failure;
  };
  const failWith = (message) => {
    if (outcome !== null) return;
    const failure = ObjectCreate(null);
    failure.ok = false;
    failure.error = message;
    outcome = failure;
  };
  const finish = (value) => {
    if (outcome !== null) return;
    if (typeof value === 'function' || typeof value === 'symbol') {
      failWith(`the handler returned a ${typeof value}, which is not JSON`);
      return;
    }
    let json;
    try {
      json = JSONStringify(value === undefined ? null : value);
    } catch (error) {
      failWith(`the handler result is not JSON-serialisable: ${firstLine(describeError(error))}`);
      return;
    }
    if (typeof json !== 'string') {
      failWith('the handler result is not JSON-serialisable');
      return;
    }
    const limit = config.maxResultBytes;
    const success = ObjectCreate(null);
    success.ok = true;
    success.cut = json.length > limit;
    success.json = success.cut ? StringToWellFormed(StringSlice(json, 0, limit + 1)) : json;
    outcome = success;
  };

  // -- Host operations: queued here, carried out by Python ----------------------
  let pendingOps = [];
  const waitingOps = new MapCtor();
  let nextOpId = 1;
  const queueHostOp = (op) => new PromiseCtor((resolve, reject) => {
    const id = nextOpId;
    nextOpId += 1;
    const entry = ObjectCreate(null);
    entry.id = id;
    const keys = ReflectOwnKeys(op);
    for (let i = 0; i < keys.length; i += 1) entry[keys[i]] = op[keys[i]];
    MapSet(waitingOps, id, { resolve, reject });
    ArrayPush(pendingOps, entry);
  });

  // -- Timers: fired by step(), so Python knows when the context needs to run ----
  const timers = new MapCtor();
  let nextTimerId = 1;
  const toDelay = (delay) => {
    const number = +delay;
    return number > 0 ? MathMin(number, 2 ** 31 - 1) : 0;
  };
  const addTimer = (callback, delay, args, repeat) => {
    if (typeof callback !== 'function') {
      throw new TypeErrorCtor('timers need a function (strings are not evaluated)');
    }
    const id = nextTimerId;
    nextTimerId += 1;
    const interval = repeat ? MathMax(1, toDelay(delay)) : null;
    MapSet(timers, id, { callback, args, deadline: DateNow() + toDelay(delay), interval });
    return id;
  };
  function setTimeout(callback, delay = 0, ...args) {
    return addTimer(callback, delay, args, false);
  }
  function setInterval(callback, delay = 0, ...args) {
    return addTimer(callback, delay, args, true);
  }
  function clearTimeout(id) {
    MapDelete(timers, +id);
  }
  function queueMicrotask(callback) {
    if (typeof callback !== 'function') throw new TypeErrorCtor('queueMicrotask needs a function');
    PromiseThen(PromiseResolve(undefined), () => {
      try {
        callback();
      } catch (error) {
        fail(error);
      }
    });
  }
  const nextDeadline = () => {
    let earliest = null;
    MapForEach(timers, (timer) => {
      if (earliest === null || timer.deadline < earliest) earliest = timer.deadline;
    });
    return earliest;
  };
  const fireDueTimers = () => {
    const now = DateNow();
    const due = [];
    MapForEach(timers, (timer, id) => {
      if (timer.deadline <= now) ArrayPush(due, [timer.deadline, id]);
    });
    ArraySort(due, (a, b) => a[0] - b[0] || a[1] - b[1]);
    for (let i = 0; i < due.length; i += 1) {
      const id = due[i][1];
      const timer = MapGet(timers, id);
      if (timer === undefined) continue;
      if (timer.interval === null) MapDelete(timers, id);
      else timer.deadline = now + timer.interval;
      try {
        ReflectApply(timer.callback, undefined, timer.args);
      } catch (error) {
        fail(error);
      }
    }
  };

  // -- Headers, fetch and responses -----------------------------------------------
  const tokenPattern = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const headerLists = new WeakMapCtor();
  const headerList = (headers) => {
    const list = WeakMapGet(headerLists, headers);
    if (list === undefined) throw new TypeErrorCtor('Illegal invocation');
    return list;
  };
  const checkHeader = (name, value) => {
    const key = StringCtor(name);
    if (!RegExpTest(tokenPattern, key)) throw new TypeErrorCtor(`Invalid header name: ${key}`);
    const text = StringCtor(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
    if (RegExpTest(/[\0\r\n]/, text)) throw new TypeErrorCtor(`Invalid value for header ${key}`);
    return [StringToLowerCase(key), StringToWellFormed(text)];
  };
  let trustedHeaderInit = null;
  class Headers {
    constructor(init = undefined) {
      const list = [];
      WeakMapSet(headerLists, this, list);
      if (trustedHeaderInit !== null) {
        const pairs = trustedHeaderInit;
        trustedHeaderInit = null;
        for (let i = 0; i < pairs.length; i += 1) {
          ArrayPush(list, [StringToLowerCase(pairs[i][0]), pairs[i][1]]);
        }
        return;
      }
      if (init === undefined || init === null) return;
      if (WeakMapGet(headerLists, init) !== undefined) {
        const source = WeakMapGet(headerLists, init);
        for (let i = 0; i < source.length; i += 1) ArrayPush(list, [source[i][0], source[i][1]]);
      } else if (typeof init[SymbolIterator] === 'function') {
        for (const pair of init) {
          const entry = toPlainArray(pair);
          if (entry.length !== 2) throw new TypeErrorCtor('Each header needs a name and a value');
          ArrayPush(list, checkHeader(entry[0], entry[1]));
        }
      } else {
        const keys = ReflectOwnKeys(init);
        for (let i = 0; i < keys.length; i += 1) {
          const descriptor = ReflectGetOwnPropertyDescriptor(init, keys[i]);
          if (typeof keys[i] === 'string' && descriptor && descriptor.enumerable) {
            ArrayPush(list, checkHeader(keys[i], init[keys[i]]));
          }
        }
      }
    }

    append(name, value) {
      ArrayPush(headerList(this), checkHeader(name, value));
    }

    delete(name) {
      const list = headerList(this);
      const key = StringToLowerCase(StringCtor(name));
      for (let i = list.length - 1; i >= 0; i -= 1) if (list[i][0] === key) ArraySplice(list, i, 1);
    }

    get(name) {
      const key = StringToLowerCase(StringCtor(name));
      const values = ArrayMap(ArrayFilter(headerList(this), (pair) => pair[0] === key),
        (pair) => pair[1]);
      return values.length === 0 ? null : ArrayJoin(values, ', ');
    }

    getSetCookie() {
      return ArrayMap(ArrayFilter(headerList(this), (pair) => pair[0] === 'set-cookie'),
        (pair) => pair[1]);
    }

    has(name) {
      return this.get(name) !== null;
    }

    set(name, value) {
      const pair = checkHeader(name, value);
      this.delete(pair[0]);
      ArrayPush(headerList(this), pair);
    }

    forEach(callback, thisArg = undefined) {
      for (const [name, value] of this) ReflectApply(callback, thisArg, [value, name, this]);
    }

    * entries() {
      const names = [];
      const list = headerList(this);
      for (let i = 0; i < list.length; i += 1) {
        if (names.indexOf(list[i][0]) < 0) ArrayPush(names, list[i][0]);
      }
      ArraySort(names);
      for (let i = 0; i < names.length; i += 1) yield [names[i], this.get(names[i])];
    }

    * keys() {
      for (const pair of this.entries()) yield pair[0];
    }

    * values() {
      for (const pair of this.entries()) yield pair[1];
    }

    [SymbolIterator]() {
      return this.entries();
    }
  }
  const responseHeaders = (pairs) => {
    trustedHeaderInit = pairs;
    return new Headers();
  };
  const forbiddenMethods = ['CONNECT', 'TRACE', 'TRACK'];
  const normalizedMethods = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
  const buildRequest = (input, init) => {
    let url;
    let method = 'GET';
    let headers = new Headers();
    let body = null;
    if (input instanceof URL) url = input.href;
    else if (input !== null && typeof input === 'object' && typeof input.url === 'string') {
      url = input.url;
      if (input.method !== undefined) method = input.method;
      if (input.headers !== undefined) headers = new Headers(input.headers);
      if (input.body !== undefined) body = input.body;
    } else url = StringCtor(input);
    const options = init === undefined || init === null ? {} : Object(init);
    if (options.method !== undefined) method = options.method;
    if (options.headers !== undefined) headers = new Headers(options.headers);
    if (options.body !== undefined) body = options.body;
    const parsed = URL.parse(url);
    if (parsed === null) throw new TypeErrorCtor('fetch: invalid URL');
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new TypeErrorCtor('fetch: only http and https URLs are allowed');
    }
    method = StringCtor(method);
    if (!RegExpTest(tokenPattern, method)) throw new TypeErrorCtor('fetch: invalid method');
    if (normalizedMethods.indexOf(method.toUpperCase()) >= 0) method = method.toUpperCase();
    if (forbiddenMethods.indexOf(method.toUpperCase()) >= 0) {
      throw new TypeErrorCtor(`fetch: the ${method} method is not allowed`);
    }
    if (body instanceof URLSearchParams) {
      if (!headers.has('content-type')) {
        headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
      }
      body = body.toString();
    } else if (typeof body === 'string') {
      if (!headers.has('content-type')) headers.set('content-type', 'text/plain;charset=UTF-8');
    } else if (body !== null && body !== undefined) {
      throw new TypeErrorCtor('fetch: the body must be a string (use JSON.stringify for JSON)');
    } else body = null;
    if (body !== null && (method === 'GET' || method === 'HEAD')) {
      throw new TypeErrorCtor(`fetch: a ${method} request cannot have a body`);
    }
    const request = ObjectCreate(null);
    request.url = parsed.href;
    request.method = method;
    request.headers = ArrayMap(headerList(headers), (pair) => [pair[0], pair[1]]);
    request.body = body === null ? null : StringToWellFormed(body);
    const limit = config.maxRequestBytes;
    const sent = request.body;
    // Every UTF-16 code unit takes at least one UTF-8 byte, at most three.
    if (sent !== null && (sent.length > limit
      || (sent.length * 3 > limit && utf8Encode(sent).length > limit))) {
      throw new TypeErrorCtor(
        `fetch: the body is larger than ${MathFloor(limit / 1024)} KB`);
    }
    return request;
  };
  const makeResponse = (payload) => {
    // The body arrives as base64 of the bytes the server sent; it becomes text only
    // when the handler asks for text.
    const bytes = fromBase64(payload.body);
    chargeBuffer(bytes.length);
    let decoded = null;
    const text = () => {
      if (decoded === null) decoded = utf8Decode(bytes, false);
      return decoded;
    };
    const response = {
      ok: payload.status >= 200 && payload.status <= 299,
      status: payload.status,
      statusText: '',
      url: payload.url,
      redirected: false,
      type: 'basic',
      headers: responseHeaders(payload.headers),
      bodyUsed: false,
      text: () => new PromiseCtor((resolve) => resolve(text())),
      json: () => new PromiseCtor((resolve) => resolve(JSONParse(text()))),
      arrayBuffer: () => new PromiseCtor((resolve) => {
        const copy = new OriginalUint8Array(bytes.length);
        for (let i = 0; i < bytes.length; i += 1) copy[i] = bytes[i];
        chargeBuffer(copy.length);
        resolve(copy.buffer);
      }),
      clone: () => makeResponse(payload),
    };
    return response;
  };
  // `const r = ctx.fetch(url); return r.json()` (no await) is how the quickstarts of the
  // platform this one grew from were written: the promise answers the body methods
  // itself, and says what to do when asked for what only a response has.
  const bodyMethods = ['json', 'text', 'arrayBuffer'];
  const responseOnly = ['ok', 'status', 'statusText', 'headers', 'url', 'redirected'];
  const awaitable = (promise) => {
    for (let i = 0; i < bodyMethods.length; i += 1) {
      const name = bodyMethods[i];
      define(promise, name, () => PromiseThen(promise, (response) => response[name]()));
    }
    for (let i = 0; i < responseOnly.length; i += 1) {
      const name = responseOnly[i];
      ObjectDefineProperty(promise, name, {
        get() {
          throw new TypeErrorCtor(`ctx.fetch() returns a promise: write \`await ctx.fetch(...)\``
            + ` before reading .${name}`);
        },
        enumerable: false,
        configurable: true,
      });
    }
    return promise;
  };
  const basicAuth = function basicAuth(user, password) {
    // RFC 7617 with UTF-8. A secret reference inside is expanded by the egress proxy,
    // which decodes Basic credentials, only for a host the secret is allowed to reach.
    const bytes = utf8Encode(`${StringCtor(user)}:${StringCtor(password)}`);
    return `Basic ${Uint8ArrayToBase64(bytes)}`;
  };
  const ctxFetch = function fetch(input, init = undefined) {
    let request;
    try {
      request = buildRequest(input, init);
    } catch (error) {
      return PromiseReject(error);
    }
    return awaitable(PromiseThen(queueHostOp({ op: 'fetch', request }), makeResponse));
  };

  // -- Handler lifecycle ------------------------------------------------------------
  const trivia = /^(?:\s|\/\/[^\n\r\u2028\u2029]*|\/\*[\s\S]*?\*\/)*$/;
  const isWholeSource = (source, text) => {
    // The value must be the one function literal the source consists of
    // (comments and whitespace around it aside), not whatever a longer
    // expression such as `(0, f)` or `f), (g` evaluated to.
    for (let at = StringIndexOf(source, text); at >= 0; at = StringIndexOf(source, text, at + 1)) {
      if (RegExpTest(trivia, StringSlice(source, 0, at))
        && RegExpTest(trivia, StringSlice(source, at + text.length))) return true;
    }
    return false;
  };
  const compileHandler = (source) => {
    const result = ObjectCreate(null);
    let value;
    try {
      value = IndirectEval(`(${source}\n)`);
    } catch (error) {
      result.error = describeError(error);
      result.syntax = error instanceof SyntaxErrorCtor;
      return result;
    }
    let text = null;
    if (typeof value === 'function') {
      try {
        text = FunctionToString(value);
      } catch {
        text = null;
      }
    }
    if (text === null || RegExpTest(/^class\b/, text) || !isWholeSource(source, text)) {
      result.error = 'the handler must be a single function expression, '
        + 'like async (args, ctx) => { ... }';
      result.syntax = false;
      return result;
    }
    result.handler = value;
    return result;
  };
  // ctx.secrets: the workspace's secrets by name. Reading one it does not have is said in
  // the call's console (once per name), not only seen later as `Bearer undefined`.
  const secretsOf = (secrets) => {
    const said = ObjectCreate(null);
    return new OriginalProxy(secrets, {
      get(target, key) {
        // (`await` and JSON.stringify look for `then` and `toJSON`: not secret reads.)
        if (typeof key === 'string' && !(key in target) && key !== 'then'
          && key !== 'toJSON' && said[key] !== true) {
          said[key] = true;
          const name = StringSlice(key, 0, 100);
          writeConsole('[warn] ', [`secret ${name} does not exist in this workspace, so `
            + `ctx.secrets.${name} is undefined: add it on the dashboard's Secrets page`]);
        }
        return ReflectGet(target, key, target);
      },
    });
  };
  let started = false;
  const start = (source, argsJson, secretsJson) => {
    if (started) return;
    started = true;
    const compiled = compileHandler(source);
    if (compiled.handler === undefined) {
      failWith(compiled.error);
      return;
    }
    const ctx = ObjectFreeze({
      secrets: secretsOf(ObjectFreeze(JSONParse(secretsJson))), fetch: ctxFetch, basicAuth,
    });
    let returned;
    try {
      returned = ReflectApply(compiled.handler, undefined, [JSONParse(argsJson), ctx]);
      PromiseThen(PromiseResolve(returned), finish, fail);
    } catch (error) {
      fail(error);
    }
  };
  const drain = () => {
    const state = ObjectCreate(null);
    state.outcome = outcome;
    state.ops = pendingOps;
    state.console = consoleText;
    state.consoleCut = consoleCut;
    state.timer = nextDeadline();
    pendingOps = [];
    consoleText = '';
    return JSONStringify(state);
  };
  const step = (repliesJson) => {
    const replies = JSONParse(repliesJson);
    for (let i = 0; i < replies.length; i += 1) {
      const reply = replies[i];
      const waiting = MapGet(waitingOps, reply[0]);
      if (waiting === undefined) continue;
      MapDelete(waitingOps, reply[0]);
      if (reply[1]) waiting.resolve(reply[2]);
      else waiting.reject(new TypeErrorCtor(reply[2]));
    }
    fireDueTimers();
  };

  // -- Globals ----------------------------------------------------------------------
  define(G, 'console', consoleObject);
  G.setTimeout = setTimeout;
  G.clearTimeout = clearTimeout;
  define(G, 'setInterval', setInterval);
  define(G, 'clearInterval', clearTimeout);
  define(G, 'queueMicrotask', queueMicrotask);
  define(G, 'DOMException', DOMException);
  define(G, 'TextEncoder', TextEncoder);
  define(G, 'TextDecoder', TextDecoder);
  define(G, 'atob', atob);
  define(G, 'btoa', btoa);
  define(G, 'URL', URL);
  define(G, 'URLSearchParams', URLSearchParams);
  define(G, 'Headers', Headers);
  define(G, 'crypto', crypto);
  ObjectDefineProperty(G, '__sandbox', {
    value: ObjectFreeze({ start, drain, step }),
    writable: false,
    enumerable: false,
    configurable: false,
  });
  return undefined;
})
