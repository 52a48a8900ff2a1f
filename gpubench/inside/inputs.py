"""What a call of a job's model is given, read at every call by the forward hook (gpubench.inside.forwards): the
key of its input's shape, its tokens, the bytes of the KV cache it reads; and what the hook asks once of the
model and of a counted call."""

from __future__ import annotations


def _backward(result) -> bool:  # the counted step ran a backward: it was training, its count no forward's
    split = getattr(result, "split", None)
    return bool(split and split.get("backward"))


def _grad_nodes(torch, output) -> list:
    """The autograd nodes of the tensors a call returned (a tensor, or those in a tuple, list or mapping such as
    Hugging Face's outputs, two levels down): a backward through the call passes one of them."""
    found, todo = [], [(output, 0)]
    while todo and len(found) < 16:
        value, depth = todo.pop()
        if isinstance(value, torch.Tensor):
            if value.grad_fn is not None:
                found.append(value.grad_fn)
        elif depth < 2 and isinstance(value, (tuple, list, dict)):
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return found


def _parameters(module) -> int:
    try:
        return sum(p.numel() for p in module.parameters())
    except Exception:  # noqa: BLE001 -- a module whose parameters() raises is no model
        return 0


def _cache_bytes(torch, kwargs) -> int:
    """The bytes of the KV cache a decoder's call reads (Hugging Face's `past_key_values`, `cache` in its later
    releases: a Cache of layers with .keys and .values, one with key_cache and value_cache lists, or tuples of
    tensors); 0 for none."""
    if not isinstance(kwargs, dict):
        return 0
    cache = kwargs.get("past_key_values")
    cache = kwargs.get("cache") if cache is None else cache
    if cache is None or isinstance(cache, torch.Tensor):
        return 0
    layers = getattr(cache, "layers", None)
    if layers is not None:
        tensors = [t for layer in layers for t in (getattr(layer, "keys", None), getattr(layer, "values", None))]
    elif hasattr(cache, "key_cache"):
        tensors = [*cache.key_cache, *cache.value_cache]
    else:
        tensors = [t for layer in cache for t in layer] if isinstance(cache, (tuple, list)) else []
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _shape(torch, args, kwargs) -> tuple:
    """(key of the input's shape, tokens): from input_ids, else the first tensor among the arguments. Run at every
    forward: the common cases first, no tuple made (a torch.Size is a key as it is)."""
    tensor = torch.Tensor
    first = kwargs.get("input_ids") if kwargs else None
    if first is None or not isinstance(first, tensor):
        first = None
        for a in args:
            if isinstance(a, tensor):
                first = a
                break
        else:
            for v in kwargs.values() if kwargs else ():
                if isinstance(v, tensor):
                    first = v
                    break
    if first is None:
        return None, None
    return (first.shape, first.dtype), (None if first.is_floating_point() else first.numel())
