# SPDX-License-Identifier: Apache-2.0
# docs/generation.md's Python example, as the page shows it (CTest runs it on the exported GPT-2).
import sys

import kiln

vm = kiln.runtime.VirtualMachine(kiln.compile(kiln.onnx.from_onnx(sys.argv[1])))
dec = kiln.runtime.Decoder(vm)  # finds input_ids, attention_mask, position_ids and the past_* caches
tokens = dec.generate([[3, 5, 7, 9], [3]], max_new_tokens=8)  # greedy; rows padded on the left
print(tokens)
dec.generate([[3, 5, 7, 9]], max_new_tokens=16, temperature=0.8, top_k=40, top_p=0.95, seed=1,
             on_token=lambda row, token: print(token, end=" ", flush=True))
