"""resolve_grid's arguments as the lab's command line gives them, all defaults (unit tests)."""


class Args:
    """resolve_grid's arguments, all defaults; keywords set the rest."""
    epochs_scale = data_fraction = workers = trials = targets = timeout = slowdown = None
    paradigms = model = train_script = data_dir = gpus_per_worker = gpu_map = None
    seed = 42

    def __init__(self, **kw):
        self.__dict__.update(kw)
