"""The sandbox's ChaCha20 (``tools_app/chacha20.js``, behind crypto.getRandomValues) against
every ChaCha20 test vector of RFC 8439 (sections 2.3.2 and 2.4.2, appendices A.1 and A.2),
and against the ``cryptography`` package's ChaCha20 on random keys, nonces and counters.
Run in node (node 20 is on every machine, as in CI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

RUNNER = Path(__file__).with_name("node") / "chacha20.mjs"
ZERO_KEY, ZERO_NONCE, ZERO_BLOCK = "00" * 32, "00" * 12, "00" * 64
IETF_TEXT = (
    "Any submission to the IETF intended by the Contributor for publication as all or part "
    "of an IETF Internet-Draft or RFC and any statement made within the context of an IETF "
    'activity is considered an "IETF Contribution". Such statements include oral statements '
    "in IETF sessions, as well as written and electronic communications made at any time or "
    "place, which are addressed to"
)
JABBERWOCKY = (
    "'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\n"
    "All mimsy were the borogoves,\nAnd the mome raths outgrabe."
)
SUNSCREEN = (
    "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    "future, sunscreen would be it."
)

# (name, key, nonce, counter, plaintext, ciphertext): a block function vector is the
# encryption of 64 zero bytes.
VECTORS = [
    ("2.3.2", bytes(range(32)).hex(), "000000090000004a00000000", 1, ZERO_BLOCK,
     "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
     "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"),
    ("2.4.2", bytes(range(32)).hex(), "000000000000004a00000000", 1, SUNSCREEN.encode().hex(),
     "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b"
     "f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8"
     "07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736"
     "5af90bbf74a35be6b40b8eedf2785e42874d"),
    ("A.1 #1", ZERO_KEY, ZERO_NONCE, 0, ZERO_BLOCK,
     "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
     "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
    ("A.1 #2", ZERO_KEY, ZERO_NONCE, 1, ZERO_BLOCK,
     "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
     "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"),
    ("A.1 #3", "00" * 31 + "01", ZERO_NONCE, 1, ZERO_BLOCK,
     "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a"
     "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0"),
    ("A.1 #4", "00ff" + "00" * 30, ZERO_NONCE, 2, ZERO_BLOCK,
     "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca"
     "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096"),
    ("A.1 #5", ZERO_KEY, "00" * 11 + "02", 0, ZERO_BLOCK,
     "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7"
     "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d"),
    ("A.2 #1", ZERO_KEY, ZERO_NONCE, 0, ZERO_BLOCK,
     "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
     "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
    ("A.2 #2", "00" * 31 + "01", "00" * 11 + "02", 1, IETF_TEXT.encode().hex(),
     "a3fbf07df3fa2fde4f376ca23e82737041605d9f4f4f57bd8cff2c1d4b7955ec"
     "2a97948bd3722915c8f3d337f7d370050e9e96d647b7c39f56e031ca5eb6250d"
     "4042e02785ececfa4b4bb5e8ead0440e20b6e8db09d881a7c6132f420e527950"
     "42bdfa7773d8a9051447b3291ce1411c680465552aa6c405b7764d5e87bea85a"
     "d00f8449ed8f72d0d662ab052691ca66424bc86d2df80ea41f43abf937d3259d"
     "c4b2d0dfb48a6c9139ddd7f76966e928e635553ba76c5c879d7b35d49eb2e62b"
     "0871cdac638939e25e8a1e0ef9d5280fa8ca328b351c3c765989cbcf3daa8b6c"
     "cc3aaf9f3979c92b3720fc88dc95ed84a1be059c6499b9fda236e7e818b04b0b"
     "c39c1e876b193bfe5569753f88128cc08aaa9b63d1a16f80ef2554d7189c411f"
     "5869ca52c5b83fa36ff216b9c1d30062bebcfd2dc5bce0911934fda79a86f6e6"
     "98ced759c3ff9b6477338f3da4f9cd8514ea9982ccafb341b2384dd902f3d1ab"
     "7ac61dd29c6f21ba5b862f3730e37cfdc4fd806c22f221"),
    ("A.2 #3", "1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0",
     "00" * 11 + "02", 42, JABBERWOCKY.encode().hex(),
     "62e6347f95ed87a45ffae7426f27a1df5fb69110044c0d73118effa95b01e5cf"
     "166d3df2d721caf9b21e5fb14c616871fd84c54f9d65b283196c7fe4f60553eb"
     "f39c6402c42234e32a356b3e764312a61a5532055716ead6962568f87d3f3f77"
     "04c6a8d1bcd1bf4d50d6154b6da731b187b58dfd728afa36757a797ac188d1"),
]  # fmt: skip


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("node is needed (it is on every machine)", pytrace=False)
        pytest.skip("needs node")
    return node


def _encrypt(cases: list[dict[str, object]]) -> list[str]:
    finished = subprocess.run(
        [_node(), str(RUNNER)], input=json.dumps(cases), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    return json.loads(finished.stdout)


def test_every_rfc_8439_chacha20_vector() -> None:
    cases = [
        {"key": key, "nonce": nonce, "counter": counter, "plaintext": plaintext}
        for _, key, nonce, counter, plaintext, _ in VECTORS
    ]
    got = _encrypt(cases)
    for (name, *_, expected), ciphertext in zip(VECTORS, got, strict=True):
        assert ciphertext == expected, name


def test_the_same_keystream_as_the_cryptography_package() -> None:
    cases = []
    for n in range(200):
        size = 1 + n * 7 % 300
        cases.append({
            "key": os.urandom(32).hex(), "nonce": os.urandom(12).hex(),
            "counter": int.from_bytes(os.urandom(4), "little") % (2**32 - 8),
            "plaintext": os.urandom(size).hex(),
        })  # fmt: skip
    for case, ciphertext in zip(cases, _encrypt(cases), strict=True):
        counter = int(case["counter"]).to_bytes(4, "little")
        algorithm = algorithms.ChaCha20(
            bytes.fromhex(case["key"]), counter + bytes.fromhex(case["nonce"])
        )
        expected = Cipher(algorithm, mode=None).encryptor().update(bytes.fromhex(case["plaintext"]))
        assert ciphertext == expected.hex()
