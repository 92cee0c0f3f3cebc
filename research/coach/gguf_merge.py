"""A trained model as a GGUF the embedded llama.cpp server loads: the base GGUF with some tensors
replaced by merged (base + LoRA) weights.

`selfplay train` starts from the SmolLM2 GGUF (dequantised by transformers' GGUF loader) and
trains LoRA adapters on a few projection matrices. Merged, only those matrices differ from the
base, so the output copies the base file (metadata, tokenizer, chat template, every other tensor
byte for byte in its original quantisation) and writes the changed matrices as F16. No
convert script is needed (llama-cpp-python's wheel ships none; the `gguf` package is llama.cpp's
own reader and writer).

llama.cpp stores a Llama model's q and k projections with the rows of each head interleaved for
its rotary embedding (`convert_hf_to_gguf.py`'s `permute`); transformers undoes that on load
(`_reverse_permute_weights`), so it is redone here. Limits: Llama-architecture GGUFs (SmolLM2's),
weights of the projections named in `GGUF_NAMES`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

GGUF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_HF_NAME = re.compile(r"^(?:model\.)?layers\.(\d+)\.(.+)\.weight$")


def gguf_name(hf_name: str) -> str:
    """`model.layers.3.self_attn.q_proj.weight` -> `blk.3.attn_q.weight`."""
    m = _HF_NAME.match(hf_name)
    if m is None or m.group(2) not in GGUF_NAMES:
        raise ValueError(f"no GGUF name for {hf_name!r}")
    return f"blk.{m.group(1)}.{GGUF_NAMES[m.group(2)]}.weight"


def permute(weights: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """llama.cpp's row order for q/k projections (convert_hf_to_gguf.py's `LlamaModel.permute`)."""
    if n_head_kv != n_head:
        n_head = n_head_kv
    rows = weights.shape[0]
    return (
        weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def to_gguf_layout(hf_name: str, weights: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    if ".q_proj." in hf_name:
        return permute(weights, n_head, n_head)
    if ".k_proj." in hf_name:
        return permute(weights, n_head, n_head_kv)
    return weights


def write_merged(
    base: Path, out: Path, weights: dict[str, np.ndarray], *, n_head: int, n_head_kv: int
) -> list[str]:
    """Copy `base` to `out` with the tensors for `weights` (HF names, HF layout) replaced; returns
    the GGUF names replaced. Writes to a temporary name first, so `out` is never half written."""
    import gguf

    replaced = {
        gguf_name(k): to_gguf_layout(k, np.asarray(v, dtype=np.float32), n_head, n_head_kv).astype(np.float16)
        for k, v in weights.items()
    }
    reader = gguf.GGUFReader(base)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    tmp = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(tmp, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        # The architecture and the GGUF.* header fields are written by GGUFWriter itself.
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    seen = set()
    for t in reader.tensors:
        new = replaced.get(t.name)
        if new is None:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
            continue
        if tuple(int(d) for d in reversed(t.shape.tolist())) != new.shape:
            raise ValueError(f"{t.name}: shape {new.shape} does not fit the base's {list(t.shape)}")
        seen.add(t.name)
        writer.add_tensor_info(t.name, new.shape, new.dtype, new.nbytes, gguf.GGMLQuantizationType.F16)
    missing = sorted(set(replaced) - seen)
    if missing:
        raise ValueError(f"tensors not in {base.name}: {', '.join(missing[:5])}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        new = replaced.get(t.name)
        writer.write_tensor_data(t.data if new is None else new, tensor_endianess=reader.endianess)
    writer.close()
    tmp.replace(out)
    return sorted(seen)
