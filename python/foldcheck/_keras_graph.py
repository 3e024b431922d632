"""The Keras side of foldcheck.keras: the conv + BatchNorm pairs of a Keras model, what the
converter may fold into each besides (a one-input op before the conv or after the
BatchNorm), the activation the Keras layer applies after its BatchNorm, and each conv's
input as Keras computes it.

The graph is read from Keras' own nodes (`_inbound_nodes`, `_outbound_nodes`), through
models nested in the model; ops that do nothing at inference (dropout, noise, a linear
activation) are stepped over, as the converter drops them.
"""
import numpy as np

from ._tensorflow import tf

L = tf.keras.layers
# Identity at inference: the converter removes them.
TRANSPARENT = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
               "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Identity")
# Layers no converter folds into the weights of a conv next to them (not a per-channel
# constant multiply or add). A BatchNormalization is one, so it is not here.
NOT_FOLDED = ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Dense",
              "LayerNormalization", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
              "GlobalMaxPooling2D", "Flatten", "Reshape", "ZeroPadding2D", "Cropping2D", "UpSampling2D", "Softmax",
              "LeakyReLU", "PReLU", "ELU", "Permute", "Resizing", "Add", "Subtract", "Multiply", "Concatenate",
              "Average", "Maximum", "Minimum")
FOLDED_CONVS = (L.Conv2D, L.DepthwiseConv2D)


def shown(v):
    """What was given, for a refusal: its repr (cut short, control characters escaped) and type."""
    r = repr(v)
    return f"{r[:57] + '...' if len(r) > 60 else r} ({type(v).__name__})"


def keras_model(model, fn):
    """`model`, refused unless it is a built Keras model: TypeError naming the argument for
    anything else (None, a path: the functions take the model, tf.keras.models.load_model
    reads a file), ValueError for a model not built (it has no layers' weights to read)."""
    if not isinstance(model, tf.keras.Model):
        raise TypeError(f"{fn}: model must be a Keras model (tf.keras.Model: functional, Sequential or nested), "
                        f"got {shown(model)}")
    if not model.built:
        raise ValueError(f"{fn}: model {model.name!r} is not built (give it an Input, or call it once)")
    return model


def layers(model, parents=None):
    """Every layer of the model, those of models nested in it included, in order; with
    parents=(), (layer, the nested models it is in, outermost first)."""
    for layer in keras_model(model, "layers").layers:
        if isinstance(layer, tf.keras.Model):
            yield from layers(layer, None if parents is None else (*parents, layer))
        else:
            yield layer if parents is None else (layer, parents)


def _nodes(model):
    """The ids of the nodes of `model`'s own graph: a layer used in several models has nodes
    in each, and only this one's count here."""
    g = getattr(model, "_functional", None) or model
    return {id(n) for nodes in getattr(g, "_nodes_by_depth", {}).values() for n in nodes}


def _outbound(op, owner):
    return [n for n in op._outbound_nodes if id(n) in _nodes(owner)]


def _inbound(op, owner):
    """op's node in owner's graph (its first call there), or None."""
    return next((n for n in op._inbound_nodes if id(n) in _nodes(owner)), None)


def _transparent(op):
    linear = isinstance(op, L.Activation) and getattr(op.activation, "__name__", "") == "linear"
    return linear or type(op).__name__ in TRANSPARENT


def _producer(layer, owner):
    """The op that makes `layer`'s input in owner's graph, past ops that do nothing at
    inference, and the ops stepped over (each must feed only the next for a fold through them)."""
    op, path = _inbound(layer, owner).input_tensors[0]._keras_history.operation, []
    while _transparent(op) and _inbound(op, owner) is not None:
        path.append(op)
        op = _inbound(op, owner).input_tensors[0]._keras_history.operation
    return op, path


def conv_bn_pairs(model):
    """Every foldable (conv, BatchNormalization, context) of a built Keras model: a Conv2D or
    DepthwiseConv2D with no activation of its own, channels last, whose output goes to that
    BatchNormalization (over the channel axis; dropout between them is nothing at inference)
    and nowhere else. context: absorbable before/after (absorbable), the activation after
    the BatchNorm (activation_after). Returns (pairs, skipped): skipped is [(BatchNormalization
    name, why not judged, whether the converter may have folded it)] for those after a conv
    that cannot be folded into (False), or one this module does not model (SeparableConv2D,
    Conv1D, Dense, a conv inside a nested model: True)."""
    pairs, skipped = [], []
    for bn, parents in layers(keras_model(model, "conv_bn_pairs"), parents=()):
        owners = (model, *parents)
        if not isinstance(bn, L.BatchNormalization) or _inbound(bn, owners[-1]) is None:
            continue
        producer, path = _producer(bn, owners[-1])
        if isinstance(producer, FOLDED_CONVS):
            why = _unfoldable(producer, bn, path, owners[-1])
            if why:
                skipped.append((bn.name, why, False))
            else:
                pairs.append((producer, bn, {"before": absorbable_before(producer, owners),
                                             "pad": zero_padding_before(producer, owners[-1]),
                                             "after": absorbable(bn, owners),
                                             "activation": activation_after(bn, owners)}))
        elif "Conv" in type(producer).__name__ or isinstance(producer, (L.Dense, tf.keras.Model)):
            skipped.append((bn.name, f"after {producer.name} ({type(producer).__name__}): not modelled "
                                     "(foldcheck.keras checks Conv2D and DepthwiseConv2D in the same model as "
                                     "their BatchNorm); the converter may fold it: not judged", True))
    return pairs, skipped


def _unfoldable(conv, bn, path, owner):
    if getattr(conv.activation, "__name__", "linear") != "linear":
        return f"{conv.name} has its own activation ({conv.activation.__name__}) before the BatchNorm"
    if conv.data_format != "channels_last":
        return f"{conv.name} is channels_first"
    if bn.axis not in (-1, [-1], 3, [3]):
        return f"the BatchNorm normalizes axis {bn.axis}, not the conv's channels"
    if any(len(_outbound(op, owner)) != 1 for op in [conv, *path]):
        return f"{conv.name}'s output is used by more than the BatchNorm (or a layer is called twice)"
    return None


def _consumers(op, owners, through=_transparent):
    """The nodes that use op's output, past ops `through` steps over (each its input's only
    user) and out of nested models (`owners`: the model and the nested models op is in,
    outermost first); [] for the model's output."""
    while True:
        nodes = _outbound(op, owners[-1])
        if not nodes and len(owners) > 1:
            op, owners = owners[-1], owners[:-1]
            continue
        if len(nodes) == 1 and through(nodes[0].operation):
            op = nodes[0].operation
            continue
        return nodes


def _next(op, owners):
    """The one op after `op` with its node, or (None, None) when op's output is the model's
    output or used more than once."""
    nodes = _consumers(op, owners)
    return (nodes[0].operation, nodes[0]) if len(nodes) == 1 else (None, None)


def _known_not_folded(op):
    return isinstance(op, L.Layer) and type(op).__name__ in NOT_FOLDED  # keras.ops' Multiply is not the layer


def _may_fold(op, node):
    """Whether the converter may fold `op` into a conv next to it: an op of one tensor (and
    constants) that is not an activation or a layer known not to fold."""
    return not (_known_not_folded(op) or isinstance(op, (L.Activation, L.ReLU)) or len(node.input_tensors) != 1)


def absorbable(bn, owners):
    """The op after `bn` the converter may fold into the conv as well, or None. A nested
    model taking bn's output is that op: it may begin with one."""
    op, node = _next(bn, owners)
    return op if op is not None and _may_fold(op, node) else None


def absorbable_before(conv, owners):
    """The ops before `conv` the converter may fold into it as well, nearest first: one-input
    ops (Rescaling, Normalization, x * 2), each making the next one's input and nothing else,
    looked for past a ZeroPadding2D (a scale passes through zero padding) and out of nested
    models."""
    chain: list[object]
    chain, op, owner_at = [], conv, len(owners)
    while True:
        op, _ = _producer(op, owners[owner_at - 1])
        if type(op).__name__ == "InputLayer":
            if owner_at == 1:
                return chain
            op, owner_at = owners[owner_at - 1], owner_at - 1  # the nested model: continue before it
            continue
        node, owner = _inbound(op, owners[owner_at - 1]), owners[owner_at - 1]
        if node is None or len(_outbound(op, owner)) != 1:
            return chain
        if isinstance(op, L.ZeroPadding2D):
            continue
        if not _may_fold(op, node):
            return chain
        chain.append(op)


def zero_padding_before(conv, owner):
    """The ZeroPadding2D making conv's input and nothing else, or None: the converter may
    merge it into the conv's own padding (Keras' applications pad, then convolve VALID)."""
    op, _ = _producer(conv, owner)
    return op if isinstance(op, L.ZeroPadding2D) and len(_outbound(op, owner)) == 1 else None


# Activations TFLite never fuses into a conv: after one of them the conv carries none.
_NEVER_FUSED = ("sigmoid", "swish", "silu", "gelu", "elu", "selu", "softplus", "softsign", "hard_sigmoid",
                "hard_swish", "hard_silu", "leaky_relu", "mish", "exponential", "log_softmax", "softmax")
# Ops an elementwise activation passes through (the converter fuses a ReLU across them).
_RESHAPES = ("Reshape", "Flatten", "Permute")


def _activation_of(op):
    """The fused activation `op` is for TFLite ("RELU", "RELU6", "NONE" for one never fused),
    or None when not known (an op that may be folded, or an activation TFLite may fuse as
    something this module does not model, such as tanh)."""
    if isinstance(op, L.ReLU):
        if float(op.negative_slope) != 0 or float(op.threshold) != 0:
            return "NONE"
        return {None: "RELU", 6.0: "RELU6"}.get(None if op.max_value is None else float(op.max_value))
    if isinstance(op, L.Activation):
        name = getattr(op.activation, "__name__", "")
        return {"relu": "RELU", "relu6": "RELU6"}.get(name, "NONE" if name in _NEVER_FUSED else None)
    if isinstance(op, (L.LeakyReLU, L.PReLU, L.ELU, L.Softmax)):
        return "NONE"
    return {"Relu": "RELU", "Relu6": "RELU6"}.get(type(op).__name__)


def activation_after(bn, owners):
    """The fused activation TFLite should give the folded conv — "NONE", "RELU" or "RELU6" —
    from what follows the BatchNorm in Keras (past a reshape, which an elementwise activation
    passes; several identical activations of its output count as one, as the converter
    merges them); None where that is not known (an op that may be folded in before the
    activation, or an activation this module does not classify)."""
    nodes = _consumers(bn, owners, through=lambda op: _transparent(op) or type(op).__name__ in _RESHAPES)
    if not nodes:
        return "NONE"
    kinds = {_activation_of(n.operation) if not _known_not_folded(n.operation) else "NONE" for n in nodes}
    if len(nodes) > 1:  # used several times: one activation the converter can merge, else none
        return kinds.pop() if len(kinds) == 1 and None not in kinds else "NONE"
    if _may_fold(nodes[0].operation, nodes[0]) and _activation_of(nodes[0].operation) is None:
        return None
    return kinds.pop()


def all_ops(model):
    """Every op of the model's graph (layers and keras.ops calls), those of nested models too."""
    g = getattr(keras_model(model, "all_ops"), "_functional", None) or model
    for op in getattr(g, "operations", model.layers):
        if isinstance(op, tf.keras.Model):
            yield from all_ops(op)
        else:
            yield op


def record(model, x, ops):
    """Each op's input and output as the Keras model computes them on x (float32 NHWC), by
    id(op): recorded from one eager call of the model, each op's call wrapped for it."""
    keras_model(model, "record")
    seen = {}

    def recording(op, call):
        def wrapped(inputs, *args, **kwargs):
            out = call(inputs, *args, **kwargs)
            seen[id(op)] = (_array(inputs), _array(out))
            return out
        return wrapped

    unique = list({id(op): op for op in ops}.values())
    originals = {id(op): op.call for op in unique}
    try:
        for op in unique:
            op.call = recording(op, op.call)
        model(x, training=False)
    finally:
        for op in unique:
            op.call = originals[id(op)]
    return seen


def _array(t):
    """A recorded tensor as float32, or None for what is not one tensor (a list of inputs)."""
    try:
        return np.asarray(t, np.float32)
    except (TypeError, ValueError):
        return None


def keras_layer(conv, bn):
    """A pair's arrays as foldcheck reads them: weight OIHW (depthwise: O = C·multiplier, I = 1),
    the conv bias (or None), gamma, beta, mean, var (float32) and eps, and the conv's geometry
    as TFLite states it (stride, dilation, "SAME"/"VALID")."""
    if not isinstance(conv, FOLDED_CONVS):
        raise TypeError(f"keras_layer: conv must be a Keras Conv2D or DepthwiseConv2D, got {shown(conv)}")
    if not isinstance(bn, L.BatchNormalization):
        raise TypeError(f"keras_layer: bn must be a Keras BatchNormalization, got {shown(bn)}")
    k = np.asarray(conv.kernel.numpy(), np.float32)
    if isinstance(conv, L.DepthwiseConv2D):  # (kh, kw, C, m) -> channel c·m + j
        kh, kw, c, m = k.shape
        w = np.transpose(k.reshape(kh, kw, c * m), (2, 0, 1))[:, None]
    else:  # (kh, kw, I, O)
        w = np.transpose(k, (3, 2, 0, 1))
    o = w.shape[0]
    bias = np.asarray(conv.bias.numpy(), np.float32) if conv.use_bias else None
    one = lambda v, fresh: np.asarray(v.numpy() if v is not None else np.full(o, fresh), np.float32)  # noqa: E731
    geometry = (tuple(int(s) for s in conv.strides), tuple(int(d) for d in conv.dilation_rate), conv.padding.upper())
    return dict(weight=np.ascontiguousarray(w), bias=bias, gamma=one(bn.gamma, 1.0), beta=one(bn.beta, 0.0),
                mean=one(bn.moving_mean, 0.0), var=one(bn.moving_variance, 1.0), eps=float(bn.epsilon),
                geometry=geometry)
