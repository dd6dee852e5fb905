"""Convert the verified GGUF generator to an OpenVINO model folder, int8 or int4 weights (run in a child process by
`models.ov_path`).

Two steps, both offline:

1. Re-quantize every tensor to GGUF Q8_0 (8-bit weights, one scale per 32 values). Our checkpoint mixes Q5_0,
   Q4_K and Q6_K tensors, which OpenVINO GenAI's GGUF reader does not take; Q8_0 it does, and 8 bits hold the
   5-6-bit values closely, so the result stays next to the dequantized fp32 model we score against. With `--int4`
   every matrix becomes Q4_0 instead (4-bit weights, one scale per 32 values: half the bytes a decoding step reads)
   but the token embedding, which is looked up rather than multiplied and stays Q8_0.
2. OpenVINO GenAI reads the re-quantized file (its weights kept 8- or 4-bit) and saves its model and tokenizer as
   IR (`openvino_model.xml/.bin`, `openvino_tokenizer`, `openvino_detokenizer`), which later loads in about a second.

Usage: python -m assistant.backends.ov_convert [--int4] SOURCE.gguf OUT_DIR
       python -m assistant.backends.ov_convert --tokenizer SOURCE.gguf OUT_DIR   (tokenizer and config only)
       python -m assistant.backends.ov_convert --encoder ENCODER_DIR OUT_DIR     (a sentence encoder, pooled)
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def gguf_alone(gguf_file: Path) -> Iterator[Path]:
    """A link to `gguf_file` in a folder of its own, to load it from with transformers. `from_pretrained(folder,
    gguf_file=name)` also reads whatever `tokenizer.json` or `config.json` the folder holds, and the model cache
    keeps the tokenizer folder's manifest, `tokenizer.json`, beside the GGUF."""
    with tempfile.TemporaryDirectory(prefix="assist-gguf-") as folder:
        link = Path(folder) / gguf_file.name
        link.symlink_to(gguf_file.resolve())
        yield link


def requantize(source: Path, target: Path, int4: bool = False) -> None:
    """Write `source` (any GGUF) to `target` with every quantized tensor as Q8_0, or with `int4` every one but the
    token embedding as Q4_0, and the metadata unchanged."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Quant

    reader = gguf.GGUFReader(str(source))
    architecture = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(target), architecture)
    # Written by the writer itself (counts, architecture) or changed here (the file type).
    own = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture", "general.file_type"}
    for name, field in reader.fields.items():
        if name in own:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), kind)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if int4 else gguf.LlamaFileType.MOSTLY_Q8_0)
    for tensor in reader.tensors:
        wanted = Quant.Q4_0 if int4 and tensor.name != "token_embd.weight" else Quant.Q8_0
        if tensor.tensor_type in (Quant.F32, Quant.F16, wanted):
            writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
        else:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            writer.add_tensor(tensor.name, gguf.quants.quantize(values, wanted), raw_dtype=wanted)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def save_openvino(gguf_file: Path) -> None:
    """Have OpenVINO GenAI read a re-quantized GGUF file and save the model and tokenizer IR beside it."""
    import openvino_genai

    openvino_genai.LLMPipeline(str(gguf_file), "CPU", enable_save_ov_model=True)


def save_tokenizer(gguf_file: Path, out: Path) -> None:
    """Save the tokenizer (with its chat template), the model config and the generation config read from a GGUF
    file, without its weights: what an engine with weights of its own needs to build prompts (seconds)."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    with gguf_alone(gguf_file) as alone:
        tokenizer = AutoTokenizer.from_pretrained(str(alone.parent), gguf_file=alone.name, trust_remote_code=False)
        config = AutoConfig.from_pretrained(str(alone.parent), gguf_file=alone.name, trust_remote_code=False)
    tokenizer.save_pretrained(str(out))
    config.save_pretrained(str(out))
    GenerationConfig.from_model_config(config).save_pretrained(str(out))


def save_encoder(source: Path, out: Path) -> None:
    """Convert a sentence encoder's transformers weights (`source`) to an OpenVINO graph, `out/encoder.xml`, that
    takes input_ids, attention_mask and token_type_ids of any batch and length and returns the pooled unit vectors
    (`mean_pool`, the pooling every encoder of assist uses), weights kept in fp32."""
    import openvino
    import torch
    from transformers import AutoModel

    from assistant.backends.pooling import mean_pool

    model = AutoModel.from_pretrained(str(source), dtype=torch.float32, trust_remote_code=False).eval()
    names = ("input_ids", "attention_mask", "token_type_ids")

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return mean_pool(self.model, batch)

    example = {name: torch.ones((2, 8), dtype=torch.long) for name in names}
    with torch.no_grad():
        graph = openvino.convert_model(
            Pooled(), example_input=example, input=[(name, [-1, -1], openvino.Type.i64) for name in names]
        )
    openvino.save_model(graph, str(out / "encoder.xml"), compress_to_fp16=False)


def main(argv: list[str]) -> int:
    partial = {"--encoder": save_encoder, "--tokenizer": save_tokenizer}.get(argv[0])
    if partial is not None:  # a sentence encoder, or a generator's tokenizer alone
        out = Path(argv[2])
        out.mkdir(parents=True, exist_ok=True)
        partial(Path(argv[1]), out)
        return 0
    int4 = argv[0] == "--int4"
    source, out = Path(argv[int4]), Path(argv[int4 + 1])
    out.mkdir(parents=True, exist_ok=True)
    requantized = out / ("model-q4_0.gguf" if int4 else "model-q8_0.gguf")
    requantize(source, requantized, int4=int4)
    save_openvino(requantized)
    requantized.unlink()
    if not (out / "openvino_model.xml").exists():
        print("OpenVINO GenAI saved no model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
