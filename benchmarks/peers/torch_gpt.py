"""etnn's sequence layers as PyTorch modules, so that an nn.Sequential of them has etnn's
state_dict names and computes what etnn computes (tests/io/interop_torch.py loads checkpoints both
ways; pytorch_train.py times the char_lm model's training step):

  TokenEmbedding        nn::embedding<D> after nn::input_tokens<T, V> (ids as floats, as etnn's datasets hold them)
  PositionalEmbedding   nn::positional_embedding
  SelfAttention         nn::multi_head_attention<H, causal>
  SequenceConv1d        nn::conv1d<N, K, stride<S>, pad<P>>
  Residual              nn::residual(block)

transformer(...) spells etnn's
  input_tokens<T, V> >> embedding<D> >> positional_embedding >> block x layers >> layer_norm
with block = residual(layer_norm >> multi_head_attention<H, true>)
          >> residual(layer_norm >> linear<4D> >> gelu >> linear<D>)
as a list of modules, to which each caller adds its head. Works with Debian's PyTorch 1.13 and PyPI's 2.x.
"""
import inspect

import torch
from torch import nn


class TokenEmbedding(nn.Embedding):
    """nn.Embedding fed the float ids etnn's datasets hold (Tokens<T, V>)."""

    def forward(self, ids):
        return super().forward(ids.long())


class PositionalEmbedding(nn.Module):
    """A learned (T, D) table added to every sample, N(0, 1) as nn.Embedding(T, D)."""

    def __init__(self, length, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(length, width))

    def forward(self, x):
        return x + self.weight


class SelfAttention(nn.MultiheadAttention):
    """attn(x, x, x), batch first, under the causal mask when causal. On PyTorch 2.x is_causal
    tells the kernel the mask is causal, so it takes its fused scaled_dot_product_attention path."""

    _takes_is_causal = "is_causal" in inspect.signature(nn.MultiheadAttention.forward).parameters

    def __init__(self, width, heads, causal):
        super().__init__(width, heads, batch_first=True)
        self.causal = causal

    def forward(self, x):
        if not self.causal:
            return super().forward(x, x, x, need_weights=False)[0]
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        hint = {"is_causal": True} if self._takes_is_causal else {}
        return super().forward(x, x, x, need_weights=False, attn_mask=mask, **hint)[0]


class SequenceConv1d(nn.Conv1d):
    """nn.Conv1d over the positions of a (B, T, C) sequence, which etnn keeps position-major:
    conv(x.transpose(1, 2)).transpose(1, 2), with nn.Conv1d's weight (N, C, K) and bias (N)."""

    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class Residual(nn.Module):
    """x + block(x): etnn's nn::residual, its block an nn.Sequential named `block`."""

    def __init__(self, *layers):
        super().__init__()
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x)


def transformer(length, vocabulary, width, heads, layers):
    modules = [TokenEmbedding(vocabulary, width), PositionalEmbedding(length, width)]
    for _ in range(layers):
        modules += [Residual(nn.LayerNorm(width), SelfAttention(width, heads, True)),
                    Residual(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))]
    return modules + [nn.LayerNorm(width)]
