"""Run an exported ``run_vlmevalkit.py`` with VLMEvalKit's ``Qwen3VLChat`` on a machine without a GPU (the slow test).

    python tests/vlmevalkit_cpu.py EXPORT/run_vlmevalkit.py --config config.json --work-dir OUT

``Qwen3VLChat`` (``vlmeval/vlm/qwen3_vl/model.py`` of ms-vlmeval 0.0.20) asserts that a GPU has free memory and loads
the weights with ``attn_implementation="flash_attention_2"`` and ``device_map="auto"``, none of which a CPU has. This
shim changes exactly those: the GPU check sees one, and the weights load with SDPA attention on the CPU. Everything
else (the prompt handed to the model, ``qwen_vl_utils``' image handling, the chat template, generation, the prediction
table and the dataset's evaluation) is VLMEvalKit's and the export's own code.
"""

import runpy
import sys

import transformers
import vlmeval.vlm.qwen3_vl.model as qwen3_vl


def _on_cpu(load):
    def from_pretrained(*args, **kwargs):
        return load(*args, **(kwargs | {"attn_implementation": "sdpa", "device_map": "cpu"}))

    return from_pretrained


qwen3_vl.get_gpu_memory = lambda: [1]
transformers.AutoModelForImageTextToText.from_pretrained = _on_cpu(
    transformers.AutoModelForImageTextToText.from_pretrained
)

if __name__ == "__main__":
    launcher, *arguments = sys.argv[1:]
    sys.argv = [launcher, *arguments]
    runpy.run_path(launcher, run_name="__main__")
