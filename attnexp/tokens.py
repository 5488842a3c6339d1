"""The token ids that data, networks and tasks share: the special tokens that open every sequence-to-sequence
vocabulary, and the target that is not scored. Imports nothing, so each of those packages may import it."""

UNK, BOS, EOS, PAD = "[unk]", "[bos]", "[eos]", "[pad]"
SEQ2SEQ_SPECIALS = (PAD, BOS, EOS, UNK)  # the first ids of every sequence-to-sequence vocabulary
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
NO_TARGET = -100  # a position that is not scored (the default ignore_index of torch's cross-entropy)
