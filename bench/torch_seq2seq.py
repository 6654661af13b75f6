#!/usr/bin/python3
"""PyTorch side of attnc's training speed comparison for translation.

An independent re-implementation, with torch and the standard library only,
of the d2l.ai book's (PyTorch edition, d2l 0.17) chapter 10 code that trains
English->French translation on the Tatoeba file: the Transformer of 10.7 and
the Bahdanau-attention GRU seq2seq of 10.4, with the book's data pipeline
(10.5), training loop (9.7's train_seq2seq), greedy decoding and BLEU.  It
follows the book's code line for line, quirks included, so that its loss,
translations and tokens per second are what the book's code gives on this
CPU; bench/train_seq2seq.sh runs it next to attnc.  Shapes: B batch, T steps,
D hidden width, H heads, V vocabulary.

Output: one line per 10 epochs, then one JSON line with the model, epochs,
final loss, training seconds, tokens per second and the translations.
"""

import argparse
import collections
import json
import math
import os
import random
import sys
import time

import torch
from torch import nn
from torch.utils import data
from torch_memory import step_memory

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO_ROOT, '..', 'shared', 'data', 'fra-eng',
                            'fra.txt')

# The book's test sentences and their references (10.4, 10.7).
ENGS = ['go .', "i lost .", "he's calm .", "i'm home ."]
FRAS = ['va !', "j'ai perdu .", 'il est calme .', 'je suis chez moi .']

# The book's hyperparameters (10.7 and 10.4).
CONFIGS = {
    'transformer': dict(num_hiddens=32, num_layers=2, dropout=0.1,
                        batch_size=64, num_steps=10, lr=0.005,
                        num_epochs=200, ffn_num_hiddens=64, num_heads=4),
    'bahdanau': dict(embed_size=32, num_hiddens=32, num_layers=2,
                     dropout=0.1, batch_size=64, num_steps=10, lr=0.005,
                     num_epochs=250),
}


# ---- data (d2l 10.5, 8.2) -------------------------------------------------

def read_data_nmt(path):
    """The whole file as one string (d2l opens it in text mode)."""
    with open(path, 'r', encoding='utf-8') as f:
        return f.read()


def preprocess_nmt(text):
    """Non-breaking spaces to spaces, lowercase, a space before , . ! ?"""
    def no_space(char, prev_char):
        return char in set(',.!?') and prev_char != ' '

    text = text.replace('\u202f', ' ').replace('\xa0', ' ').lower()
    out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char
           for i, char in enumerate(text)]
    return ''.join(out)


def tokenize_nmt(text, num_examples=None):
    """Word tokens of each side; d2l's `i > num_examples` reads N + 1 lines."""
    source, target = [], []
    for i, line in enumerate(text.split('\n')):
        if num_examples and i > num_examples:
            break
        parts = line.split('\t')
        if len(parts) == 2:
            source.append(parts[0].split(' '))
            target.append(parts[1].split(' '))
    return source, target


def count_corpus(tokens):
    """Token counts, in order of first appearance (a Counter keeps it)."""
    if len(tokens) == 0 or isinstance(tokens[0], list):
        tokens = [token for line in tokens for token in line]
    return collections.Counter(tokens)


class Vocab:
    """d2l's Vocab: <unk> 0, the reserved tokens, then by decreasing count."""

    def __init__(self, tokens=None, min_freq=0, reserved_tokens=None):
        if tokens is None:
            tokens = []
        if reserved_tokens is None:
            reserved_tokens = []
        counter = count_corpus(tokens)
        self._token_freqs = sorted(counter.items(), key=lambda x: x[1],
                                   reverse=True)
        self.idx_to_token = ['<unk>'] + reserved_tokens
        self.token_to_idx = {token: idx
                             for idx, token in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.idx_to_token.append(token)
                self.token_to_idx[token] = len(self.idx_to_token) - 1

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def to_tokens(self, indices):
        if not isinstance(indices, (list, tuple)):
            return self.idx_to_token[indices]
        return [self.idx_to_token[index] for index in indices]

    @property
    def unk(self):
        return 0


def truncate_pad(line, num_steps, padding_token):
    """Cut or pad a list of ids to num_steps."""
    if len(line) > num_steps:
        return line[:num_steps]
    return line + [padding_token] * (num_steps - len(line))


def build_array_nmt(lines, vocab, num_steps):
    """(N, T) ids with <eos> appended, and the valid lengths (non-<pad>)."""
    lines = [vocab[l] for l in lines]
    lines = [l + [vocab['<eos>']] for l in lines]
    array = torch.tensor([truncate_pad(l, num_steps, vocab['<pad>'])
                          for l in lines])
    valid_len = (array != vocab['<pad>']).type(torch.int32).sum(1)
    return array, valid_len


def load_data_nmt(path, batch_size, num_steps, num_examples=600):
    """Shuffled batches (the last one partial) and both vocabularies."""
    text = preprocess_nmt(read_data_nmt(path))
    source, target = tokenize_nmt(text, num_examples)
    reserved = ['<pad>', '<bos>', '<eos>']
    src_vocab = Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = build_array_nmt(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len = build_array_nmt(target, tgt_vocab, num_steps)
    dataset = data.TensorDataset(src_array, src_valid_len, tgt_array,
                                 tgt_valid_len)
    data_iter = data.DataLoader(dataset, batch_size, shuffle=True)
    return data_iter, src_vocab, tgt_vocab


# ---- attention (d2l 10.3, 10.5, 10.6) -------------------------------------

def sequence_mask(X, valid_len, value=0):
    """Set the entries of each row of X at or past its valid length."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """Softmax over the last axis with masked entries set to -1e6."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    """w_v^T tanh(W_q q + W_k k), masked softmax, dropout on the weights."""

    def __init__(self, key_size, query_size, num_hiddens, dropout):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = queries.unsqueeze(2) + keys.unsqueeze(1)  # (B, Q, K, D)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class DotProductAttention(nn.Module):
    """Scaled dot-product attention with dropout on the weights."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    """(B, T, D) -> (B*H, T, D/H)."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """(B*H, T, D/H) -> (B, T, D)."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    """H heads of dot-product attention; projections without bias."""

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table P, then dropout."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / \
            torch.pow(10000, torch.arange(0, num_hiddens, 2,
                                          dtype=torch.float32) / num_hiddens)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :].to(X.device)
        return self.dropout(X)


# ---- the encoder-decoder framework (d2l 9.6) ------------------------------

class EncoderDecoder(nn.Module):
    """Encodes the source, initializes the decoder's state, decodes."""

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, *args):
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)


# ---- Transformer (d2l 10.7) -----------------------------------------------

class PositionWiseFFN(nn.Module):
    """dense2(relu(dense1(X))) at every position."""

    def __init__(self, ffn_num_input, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(ffn_num_input, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """Residual connection followed by layer normalization."""

    def __init__(self, normalized_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Module):
    """Self-attention and FFN, each with AddNorm."""

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
                 dropout, use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(key_size, query_size, value_size,
                                            num_hiddens, num_heads, dropout,
                                            use_bias)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(ffn_num_input, ffn_num_hiddens,
                                   num_hiddens)
        self.addnorm2 = AddNorm(norm_shape, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Module):
    """Scaled embedding plus positions, then num_layers EncoderBlocks."""

    def __init__(self, vocab_size, key_size, query_size, value_size,
                 num_hiddens, norm_shape, ffn_num_input, ffn_num_hiddens,
                 num_heads, num_layers, dropout, use_bias=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_layers):
            self.blks.add_module("block" + str(i), EncoderBlock(
                key_size, query_size, value_size, num_hiddens, norm_shape,
                ffn_num_input, ffn_num_hiddens, num_heads, dropout,
                use_bias))

    def forward(self, X, valid_lens, *args):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self.attention_weights = [None] * len(self.blks)
        for i, blk in enumerate(self.blks):
            X = blk(X, valid_lens)
            self.attention_weights[i] = \
                blk.attention.attention.attention_weights
        return X


class DecoderBlock(nn.Module):
    """Causal self-attention, encoder-decoder attention, FFN.

    state[2][i] holds this block's inputs so far: the whole target in
    training, the tokens decoded so far when predicting one at a time.
    """

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
                 dropout, i):
        super().__init__()
        self.i = i
        self.attention1 = MultiHeadAttention(key_size, query_size, value_size,
                                             num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.attention2 = MultiHeadAttention(key_size, query_size, value_size,
                                             num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(ffn_num_input, ffn_num_hiddens,
                                   num_hiddens)
        self.addnorm3 = AddNorm(norm_shape, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        if state[2][self.i] is None:
            key_values = X
        else:
            key_values = torch.cat((state[2][self.i], X), axis=1)
        state[2][self.i] = key_values
        if self.training:
            batch_size, num_steps, _ = X.shape
            # (B, T): query t sees keys 0..t
            dec_valid_lens = torch.arange(
                1, num_steps + 1, device=X.device).repeat(batch_size, 1)
        else:
            dec_valid_lens = None
        X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
        Y = self.addnorm1(X, X2)
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(nn.Module):
    """Scaled embedding plus positions, DecoderBlocks, a dense layer to V."""

    def __init__(self, vocab_size, key_size, query_size, value_size,
                 num_hiddens, norm_shape, ffn_num_input, ffn_num_hiddens,
                 num_heads, num_layers, dropout):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.num_layers = num_layers
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_layers):
            self.blks.add_module("block" + str(i), DecoderBlock(
                key_size, query_size, value_size, num_hiddens, norm_shape,
                ffn_num_input, ffn_num_hiddens, num_heads, dropout, i))
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        return [enc_outputs, enc_valid_lens, [None] * self.num_layers]

    def forward(self, X, state):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)
            self._attention_weights[0][i] = \
                blk.attention1.attention.attention_weights
            self._attention_weights[1][i] = \
                blk.attention2.attention.attention_weights
        return self.dense(X), state


def make_transformer(c, src_vocab, tgt_vocab):
    """The book's Transformer: key, query, value sizes and FFN input = D."""
    d = c['num_hiddens']
    encoder = TransformerEncoder(
        len(src_vocab), d, d, d, d, [d], d, c['ffn_num_hiddens'],
        c['num_heads'], c['num_layers'], c['dropout'])
    decoder = TransformerDecoder(
        len(tgt_vocab), d, d, d, d, [d], d, c['ffn_num_hiddens'],
        c['num_heads'], c['num_layers'], c['dropout'])
    return EncoderDecoder(encoder, decoder)


# ---- Bahdanau attention seq2seq (d2l 9.7, 10.4) ---------------------------

class Seq2SeqEncoder(nn.Module):
    """Embedding and a multilayer GRU over the source, time-major."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers,
                          dropout=dropout)

    def forward(self, X, *args):
        X = self.embedding(X)
        X = X.permute(1, 0, 2)  # (T, B, embed)
        output, state = self.rnn(X)
        return output, state


class Seq2SeqAttentionDecoder(nn.Module):
    """A GRU fed, at each step, the token and its attention context.

    The query is the last layer's hidden state; keys and values are the
    encoder's outputs at every source step.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens,
                                           num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)  # (T, B, embed)
        outputs, self._attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)  # (B, 1, D)
            context = self.attention(query, enc_outputs, enc_outputs,
                                     enc_valid_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state,
                                          enc_valid_lens]


def make_bahdanau(c, src_vocab, tgt_vocab):
    """The book's 10.4 model."""
    encoder = Seq2SeqEncoder(len(src_vocab), c['embed_size'],
                             c['num_hiddens'], c['num_layers'], c['dropout'])
    decoder = Seq2SeqAttentionDecoder(len(tgt_vocab), c['embed_size'],
                                      c['num_hiddens'], c['num_layers'],
                                      c['dropout'])
    return EncoderDecoder(encoder, decoder)


# ---- training (d2l 9.7) ---------------------------------------------------

class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """Per-sequence cross-entropy, mean over T with padding weighted 0."""

    def forward(self, pred, label, valid_len):
        weights = torch.ones_like(label)
        weights = sequence_mask(weights, valid_len)
        self.reduction = 'none'
        unweighted_loss = super().forward(pred.permute(0, 2, 1), label)
        weighted_loss = (unweighted_loss * weights).mean(dim=1)
        return weighted_loss


def grad_clipping(net, theta):
    """Scale all gradients so that their global norm is at most theta."""
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def xavier_init_weights(m):
    """Xavier-uniform for Linear weights and GRU weight matrices."""
    if type(m) == nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) == nn.GRU:
        for param in m._flat_weights_names:
            if "weight" in param:
                nn.init.xavier_uniform_(m._parameters[param])


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab):
    """d2l's loop; returns (loss, seconds, tokens, d2l's tokens/sec).

    The loss is the last epoch's sum of per-sequence losses over its number
    of tokens; d2l's tokens/sec is the last epoch's tokens over its time.
    seconds and tokens cover all epochs.  A line every 10 epochs.
    """
    net.apply(xavier_init_weights)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = MaskedSoftmaxCELoss()
    net.train()
    total_seconds, total_tokens = 0.0, 0.0
    for epoch in range(num_epochs):
        start = time.perf_counter()
        metric = [0.0, 0.0]  # sum of training loss, number of tokens
        for batch in data_iter:
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = batch
            bos = torch.tensor([tgt_vocab['<bos>']] * Y.shape[0]).reshape(-1, 1)
            dec_input = torch.cat([bos, Y[:, :-1]], 1)  # teacher forcing
            Y_hat, _ = net(X, dec_input, X_valid_len)
            l = loss(Y_hat, Y, Y_valid_len)
            l.sum().backward()
            grad_clipping(net, 1)
            num_tokens = Y_valid_len.sum()
            optimizer.step()
            with torch.no_grad():
                metric[0] += float(l.sum())
                metric[1] += float(num_tokens)
        seconds = time.perf_counter() - start
        total_seconds += seconds
        total_tokens += metric[1]
        if (epoch + 1) % 10 == 0:
            print(f'epoch {epoch + 1}/{num_epochs} '
                  f'loss {metric[0] / metric[1]:.4f} '
                  f'{metric[1] / seconds:.0f} tokens/s '
                  f'{total_seconds:.1f} s', flush=True)
    return (metric[0] / metric[1], total_seconds, total_tokens,
            metric[1] / seconds)


# ---- prediction and BLEU (d2l 9.7) ----------------------------------------

def predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps):
    """Greedy decoding, one token at a time, until <eos> or num_steps."""
    net.eval()
    src_tokens = src_vocab[src_sentence.lower().split(' ')] + [
        src_vocab['<eos>']]
    enc_valid_len = torch.tensor([len(src_tokens)])
    src_tokens = truncate_pad(src_tokens, num_steps, src_vocab['<pad>'])
    enc_X = torch.unsqueeze(torch.tensor(src_tokens, dtype=torch.long), dim=0)
    enc_outputs = net.encoder(enc_X, enc_valid_len)
    dec_state = net.decoder.init_state(enc_outputs, enc_valid_len)
    dec_X = torch.unsqueeze(torch.tensor([tgt_vocab['<bos>']],
                                         dtype=torch.long), dim=0)
    output_seq = []
    for _ in range(num_steps):
        Y, dec_state = net.decoder(dec_X, dec_state)
        dec_X = Y.argmax(dim=2)
        pred = dec_X.squeeze(dim=0).type(torch.int32).item()
        if pred == tgt_vocab['<eos>']:
            break
        output_seq.append(pred)
    return ' '.join(tgt_vocab.to_tokens(output_seq))


def bleu(pred_seq, label_seq, k):
    """d2l's BLEU; 0 where d2l divides by zero (a prediction under n tokens,
    as rt_bleu does)."""
    pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, k + 1):
        if len_pred - n + 1 <= 0:
            return 0.0
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[' '.join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
                num_matches += 1
                label_subs[' '.join(pred_tokens[i: i + n])] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


# ---- the run --------------------------------------------------------------

def measure_memory(net, data_iter, tgt_vocab):
    """One training step's memory (bench/torch_memory.py, as
    bench/gpt_torch.py measures it), printed as JSON."""
    net.apply(xavier_init_weights)
    net.train()
    X, X_valid_len, Y, Y_valid_len = next(iter(data_iter))
    bos = torch.tensor([tgt_vocab['<bos>']] * Y.shape[0]).reshape(-1, 1)
    dec_input = torch.cat([bos, Y[:, :-1]], 1)
    loss = MaskedSoftmaxCELoss()

    def step():
        Y_hat, _ = net(X, dec_input, X_valid_len)
        return loss(Y_hat, Y, Y_valid_len).sum()

    saved, peak, grads = step_memory(step, net.parameters())
    print(json.dumps({'saved_bytes': saved, 'peak_bytes': peak,
                      'grad_bytes': grads}))
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--model', choices=sorted(CONFIGS), required=True)
    p.add_argument('--data', default=DEFAULT_DATA,
                   help='Tatoeba-format file (default: %(default)s)')
    p.add_argument('--epochs', type=int,
                   help="number of epochs (default: the book's, 200 for "
                        "the Transformer, 250 for Bahdanau)")
    p.add_argument('--threads', type=int, default=1,
                   help='torch.set_num_threads (default: 1)')
    p.add_argument('--memory', action='store_true',
                   help='print the bytes one training step keeps for its '
                   'backward and its allocations\' peak, then exit')
    p.add_argument('--seed', type=int, default=0,
                   help='seed of torch and random (default: 0)')
    args = p.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        p.error('--epochs must be positive')
    if args.threads < 1:
        p.error('--threads must be positive')
    return args


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    c = dict(CONFIGS[args.model])
    if args.epochs is not None:
        c['num_epochs'] = args.epochs
    try:
        data_iter, src_vocab, tgt_vocab = load_data_nmt(
            args.data, c['batch_size'], c['num_steps'])
    except OSError as e:
        sys.exit(f'torch_seq2seq: {e}')
    make = make_transformer if args.model == 'transformer' else make_bahdanau
    net = make(c, src_vocab, tgt_vocab)
    if args.memory:
        return measure_memory(net, data_iter, tgt_vocab)
    print(f'{args.model}: {len(data_iter.dataset)} pairs, vocab '
          f'{len(src_vocab)}/{len(tgt_vocab)}, {c["num_epochs"]} epochs, '
          f'torch {torch.__version__}, {torch.get_num_threads()} thread(s)',
          flush=True)
    loss, seconds, tokens, d2l_rate = train_seq2seq(
        net, data_iter, c['lr'], c['num_epochs'], tgt_vocab)
    print(f'loss {loss:.3f}, {d2l_rate:.1f} tokens/sec on cpu')
    translations = []
    for eng, fra in zip(ENGS, FRAS):
        translation = predict_seq2seq(net, eng, src_vocab, tgt_vocab,
                                      c['num_steps'])
        score = bleu(translation, fra, k=2)
        print(f'{eng} => {translation}, bleu {score:.3f}')
        translations.append({'src': eng, 'pred': translation, 'ref': fra,
                             'bleu': round(score, 3)})
    print(json.dumps({
        'model': args.model, 'epochs': c['num_epochs'], 'loss': loss,
        'seconds': round(seconds, 3), 'tokens_per_sec': round(d2l_rate, 1),
        'tokens': int(tokens),
        'tokens_per_sec_all_epochs': round(tokens / seconds, 1),
        'threads': torch.get_num_threads(), 'torch': torch.__version__,
        'translations': translations}))


if __name__ == '__main__':
    main(sys.argv[1:])
