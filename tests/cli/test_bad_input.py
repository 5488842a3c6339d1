"""Each bad input gets one clear paragraph, a non-zero exit status and no traceback."""

from __future__ import annotations

import pytest
from helpers import fake_mnist, run_dirs

# (overrides, words the message must contain, exit status)
CASES = {
    "unknown variant": (
        ["model=softermax"],
        ["model=softermax names no option of the config group model", "dot", "euclid", "l2", "cosine", "mlp"],
        2,
    ),
    "unknown dataset": (
        ["data=imagenet"],
        ["data=imagenet names no option of the config group data", "digits", "mnist"],
        2,
    ),
    "unknown trainer": (["trainer=tpu"], ["trainer=tpu names no option of the config group trainer", "cpu", "gpu"], 2),
    "mistyped option": (["data=mnst"], ["Did you mean data=mnist?"], 2),
    "mistyped key": (["trainer.max_epoch=3"], ["Did you mean trainer.max_epochs?"], 2),
    "list split by a space": (
        ["model=dot,", "euclid"],
        ["'model=dot, euclid' is one list split by a space", "write model=dot,euclid"],
        2,
    ),
    "dim not divisible by heads": (["model.heads=3"], ["dim=4 is not divisible by heads=3", "[1, 2, 4]"], 2),
    "patch size": (["data.patch_size=3"], ["patch_size=3 does not divide", "Allowed: [1, 2, 4, 8]"], 2),
    "zero lr": (["module.optimizer.lr=0"], ["module.optimizer.lr=0 is not allowed", "positive number"], 2),
    "negative batch size": (["data.batch_size=-4"], ["data.batch_size=-4 is not allowed", "positive integer"], 2),
    "zero epochs": (["trainer.max_epochs=0"], ["trainer.max_epochs=0 is not allowed"], 2),
    "val split too large": (["data.val_size=2000"], ["val_size=2000 leaves nothing to train on", "1437"], 2),
    "missing ckpt": (["ckpt_path=/nowhere/last.ckpt"], ["ckpt_path=/nowhere/last.ckpt does not exist"], 2),
    "gpu without gpu": (["trainer=gpu"], ["asks for a GPU", "trainer=cpu"], 2),
    "wrong type": (["trainer.max_epochs=abc"], ["trainer.max_epochs=abc is not allowed", "converted to Integer"], 2),
    "misspelt boolean": (["resume=flase"], ["resume=flase is not allowed", "not a valid bool"], 2),
    "not a boolean": (["test=maybe"], ["test=maybe is not allowed", "not a valid bool"], 2),
    "no end": (["trainer.max_epochs=-1"], ["trains without end", "trainer.max_steps"], 2),
    "infinite lr": (["module.optimizer.lr=inf"], ["module.optimizer.lr=inf is not allowed", "finite positive"], 2),
    "no attention figures": (["task.num_attention=0"], ["task.num_attention=0 is not allowed"], 2),
    "euclid eps": (["model=euclid", "model.eps=0"], ["model.eps=0 is not allowed", "positive number"], 2),
    "heads larger than dim": (["model.heads=8"], ["heads must be between 1 and dim=4"], 2),
    "empty val split": (["data.val_size=0"], ["data.val_size=0 is not allowed", "positive integer"], 2),
    "cosine without epochs": (
        ["module/scheduler=cosine", "trainer.max_epochs=-1", "trainer.max_steps=8"],
        ["module.scheduler.T_max=-1 is not allowed", "module/scheduler=null"],
        2,
    ),
    "corpus context": (["data=corpus", "data.context=64"], ["data.context<=56, data=text data.path=FILE"], 2),
    "optimizer argument": (
        ["module.optimizer._target_=torch.optim.RMSprop"],
        ["module.optimizer sets fused", "~module.optimizer.fused"],
        2,
    ),
    "clipping as a module key": (["module.gradient_clip_val=1.0"], ["Did you mean trainer.gradient_clip_val?"], 2),
    "a group misspelt": (["modle=dot"], ["modle=dot sets modle", "Did you mean model=dot?"], 2),
    "a mixer's option misspelt": (
        ["model.hedas=2"],
        ["model.hedas is not an option of DotAttention", "its options are heads,", "Did you mean model.heads?"],
        2,
    ),
    "an option added that the class does not take": (
        ["+model.hedas=2"],
        ["model.hedas is not an option of DotAttention", "Did you mean model.heads?"],
        2,
    ),
    "clip algorithm": (
        ["trainer.gradient_clip_algorithm=l1"],
        ["trainer.gradient_clip_algorithm='l1' is not allowed", "'norm'"],
        2,
    ),
    "zero accumulation": (
        ["trainer.accumulate_grad_batches=0"],
        ["trainer.accumulate_grad_batches=0 is not allowed", "positive integer"],
        2,
    ),
    "output not writable": (["paths.log_dir=/dev/null/out"], ["Cannot write run output", "paths.log_dir="], 2),
    "pairs do not fit": (
        ["data=mqar", "data.num_pairs=20"],
        ["data.num_pairs=20 with 20 queries does not fit", "data.seq_len=64"],
        2,
    ),
    "zero pairs": (["data=mqar", "data.num_pairs=0"], ["data.num_pairs=0 is not allowed", "positive integer"], 2),
    "unknown sequence op": (
        ["data=seqops", "data.op=shuffle"],
        ["data.op='shuffle' is not a sequence operation", "copy, reverse, sort"],
        2,
    ),
    "a Trainer argument it does not take": (
        ["+trainer.foo=1"],
        ["trainer.foo is not an option of Trainer", "its options are", "max_epochs"],
        2,
    ),
    "a precision Lightning does not have": (
        ["trainer.precision=33"],
        [
            "trainer.precision=33 is not allowed: Lightning's Trainer refuses it",
            "Precision 33 is invalid",
            "bf16-mixed",
        ],
        2,
    ),
    "a negative batch limit": (
        ["trainer.limit_train_batches=-1"],
        ["trainer.limit_train_batches=-1 is not allowed", "it has to be in [0.0, 1.0] or an int"],
        2,
    ),
    "a negative split seed": (
        ["data.split_seed=-3"],
        ["data.split_seed=-3 is not allowed", "an integer from 0 to 4294967295"],
        2,
    ),
    "a seed numpy does not take": (["seed=4294967296"], ["seed=4294967296 is not allowed", "from 0 to 4294967295"], 2),
    "a key given twice": (
        ["trainer.max_epochs=1", "trainer.max_epochs=abc"],
        [
            "trainer.max_epochs=abc is not allowed",
            "trainer.max_epochs is given twice (trainer.max_epochs=1, trainer.max_epochs=abc): give it once",
        ],
        2,
    ),
    "a key added twice": (
        ["+trainer.foo=1", "+trainer.foo=2"],
        ["+trainer.foo=2 adds trainer.foo a second time", "given twice (+trainer.foo=1, +trainer.foo=2)"],
        2,
    ),
    "a key of 300 characters": ([f"+{'k' * 300}=1"], ["names a key of 300 characters", "--cfg job"], 2),
    "a value of 5,000 characters": ([f"model.heads={'x' * 5000}"], ["model.heads='xxx", "x...x", "is not allowed"], 2),
    "a number of 5,000 digits": ([f"data.batch_size={'9' * 5000}"], ["cannot be read", "5000 digits"], 2),
    "an option of 5,000 characters": ([f"model={'x' * 5000}"], ["names an option of 5000", "dot, euclid"], 2),
    "a checkpoint's name longer than a file system takes": ([f"ckpt_path=/tmp/{'x' * 300}"], ["does not exist"], 2),
    "split too large for the task": (
        [
            "data=seqops",
            "data.vocab=3",
            "data.train_max_len=2",
            "data.test_lengths=[1,2]",
            "data.train_size=50",
            "data.val_size=20",
        ],
        ["the space of inputs is too small"],
        2,
    ),
    # values Lightning or the task would refuse only during the run, after its folder exists
    "no epochs between validations": (
        ["trainer.check_val_every_n_epoch=0"],
        ["trainer.check_val_every_n_epoch=0 is not allowed", "positive integer"],
        2,
    ),
    "no batches between validations": (
        ["+trainer.val_check_interval=0"],
        ["trainer.val_check_interval=0 is not allowed", "(0, 1]"],
        2,
    ),
    "a metric the task does not log": (
        ["task.monitor=val/nope"],
        ["task.monitor=val/nope is not a metric", "val/acc, val/acc_best, val/loss"],
        2,
    ),
    "a checkpoint metric misspelt": (
        ["callbacks.checkpoint.monitor=val/acc_typo"],
        ["callbacks.checkpoint.monitor=val/acc_typo is not a metric", "Did you mean val/acc_best?"],
        2,
    ),
    "more threads than cores": (["threads=100000"], ["threads=100000 is not allowed", "cores"], 2),
    "no steps between divergence checks": (
        ["module.divergence_check_every=0"],
        ["module.divergence_check_every=0 is not allowed", "positive integer"],
        2,
    ),
    "epochs beyond a 64-bit count": (
        ["trainer.max_epochs=100000000000000000000"],
        ["trainer.max_epochs=100000000000000000000 is not allowed", "9223372036854775807"],
        2,
    ),
    "steps beyond a 64-bit count": (
        ["trainer.max_steps=100000000000000000000"],
        ["trainer.max_steps=100000000000000000000 is not allowed", "9223372036854775807"],
        2,
    ),
    "a negative logging interval": (
        ["trainer.log_every_n_steps=-1"],
        ["trainer.log_every_n_steps=-1 is not allowed", "an integer >= 0"],
        2,
    ),
    "a sweep folder that cannot be written": (
        ["--multirun", "seed=1,2", "hydra.sweep.dir=/proc/sweep"],
        ["Cannot write run output under /proc/sweep", "hydra.sweep.dir="],
        2,
    ),
    # one rule for every switch: true or false
    "a switch as yes": (["resume=yes"], ["resume=yes is not allowed", "true or false"], 2),
    "a switch as on": (["test=on"], ["test=on is not allowed", "true or false"], 2),
    "a switch of a group as yes": (["net.prenorm=yes"], ["net.prenorm=yes is not allowed", "true or false"], 2),
    "a search path that does not exist": (
        ["hydra.searchpath=[file://nowhere]"],
        ["hydra.searchpath names nowhere", "does not exist"],
        2,
    ),
    "an option looked for on a search path that does not exist": (
        ["hydra.searchpath=[file://nowhere]", "model=mine"],
        ["hydra.searchpath names nowhere", "does not exist"],
        2,
    ),
    # messages name the key the user changed, paths relative to the working folder
    "a test split that leaves nothing to train on": (
        ["data.test_size=1700"],
        ["data.test_size=1700 with data.val_size=180 leaves nothing to train on", "1797"],
        2,
    ),
    "an override without a key": (["=3"], ["'=3' sets no key", "key=value"], 2),
    "a flag Hydra does not have": (["--badflag"], ["--badflag is not a flag of the command", "--multirun"], 2),
    "a flag misspelt": (["--multirn", "seed=1"], ["--multirn is not a flag", "Did you mean --multirun?"], 2),
    "a flag's value it does not take": (
        ["--info", "bogus"],
        ["The command line cannot be read", "invalid choice: 'bogus'", "--help lists the flags"],
        2,
    ),
    # Hydra's warnings while composing: the config it would go on with is not the one written
    "a search path Hydra skips": (
        ["hydra.searchpath=[pkg://os]"],
        ["Hydra warns about the configuration", "path=os is not available", "--info searchpath"],
        2,
    ),
    # the Trainer's arguments: Lightning's construction refuses these, or they are checked before it
    "sanity steps below -1": (
        ["trainer.num_sanity_val_steps=-5"],
        ["trainer.num_sanity_val_steps=-5 is not allowed", "an integer >= -1"],
        2,
    ),
    "a negative minimum of epochs": (["+trainer.min_epochs=-3"], ["trainer.min_epochs=-3 is not allowed"], 2),
    "a negative minimum of steps": (["+trainer.min_steps=-3"], ["trainer.min_steps=-3 is not allowed"], 2),
    "a Trainer switch as a word": (
        ["+trainer.detect_anomaly=maybe"],
        ["+trainer.detect_anomaly=maybe is not allowed", "a switch of the Trainer, true or false"],
        2,
    ),
    "determinism as a word": (
        ["trainer.deterministic=sometimes"],
        ["trainer.deterministic=sometimes is not allowed", "true, false or warn"],
        2,
    ),
    "validation beyond the epoch": (
        ["+trainer.val_check_interval=1000"],
        ["+trainer.val_check_interval=1000 is not allowed", "an epoch has 20 training batches", "at most 20"],
        2,
    ),
    "a malformed time budget": (
        ["+trainer.max_time=1:2"],
        ["+trainer.max_time=1:2 is not allowed", "DD:HH:MM:SS"],
        2,
    ),
    "no logging interval": (["trainer.log_every_n_steps=0.5"], ["trainer.log_every_n_steps=0.5 is not allowed"], 2),
    "no batches accumulated": (["trainer.accumulate_grad_batches=0"], ["accumulate_grad_batches=0 is not allowed"], 2),
    "a negative clipping": (["trainer.gradient_clip_val=-1"], ["trainer.gradient_clip_val=-1.0 is not allowed"], 2),
    "negative validation batches": (["trainer.limit_val_batches=-2"], ["limit_val_batches=-2 is not allowed"], 2),
    "more than all batches to overfit": (["+trainer.overfit_batches=1.5"], ["overfit_batches=1.5 is not allowed"], 2),
    "no devices": (["trainer.devices=0"], ["trainer.devices=0 is not allowed"], 2),
    "an unknown accelerator": (["trainer.accelerator=bogus"], ["trainer.accelerator=bogus is not allowed"], 2),
    "a negative reload interval": (
        ["+trainer.reload_dataloaders_every_n_epochs=-1"],
        ["reload_dataloaders_every_n_epochs=-1 is not allowed", "int >= 0"],
        2,
    ),
    "an unknown profiler": (["+trainer.profiler=bogus"], ["trainer.profiler=bogus is not allowed", "simple"], 2),
    "a seed listed twice": (
        ["--multirun", "seed=0,0"],
        ["into one folder: seed=0", "into outputs/runs/dot_digits_", "list each once"],
        2,
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_explained(cli, case):
    overrides, words, status = CASES[case]
    if case == "gpu without gpu":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    root, proc = cli(*overrides, "callbacks.progress_bar.refresh_rate=0", check=False)
    code, output = proc.returncode, proc.stdout + proc.stderr
    assert code == status, output[-2000:]
    for word in words:
        assert word in output, (word, output[-2000:])
    assert "Traceback" not in output and "To append to your config" not in output and "model='dot,'" not in output
    assert "Run folder" not in output and "Resuming" not in output  # nothing said of a folder before a refusal
    assert max(map(len, output.split())) < 250  # a long value is shown by its start and end
    assert "GPU available" not in output  # Lightning's lines of a Trainer built to check its arguments
    assert "Warning" not in output  # a library's warnings are said in the paragraph, not printed raw
    assert "usage: attnexp" not in output  # Hydra's parser's usage: a flag is said in the paragraph too
    assert str(root) not in output  # paths relative to the working folder
    assert not list(root.iterdir())  # nothing written: not even an empty outputs/


def test_missing_mnist_offline(cli, tmp_path):
    root, proc = cli("data=mnist", "data.download=false", f"paths.data_dir={tmp_path}/nothing", check=False)
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    assert f"{tmp_path}/nothing/MNIST/raw" in output and "ATTNEXP_DATA_DIR" in output
    assert "Could not load MNIST" in output and "Nothing was run" not in output.split("Could not load MNIST")[0]
    assert not run_dirs(root / "outputs") and not (root / "outputs" / "runs").exists()


@pytest.mark.parametrize("damage", ["truncate", "magic"])
def test_corrupt_idx_file(cli, tmp_path, damage):
    data = tmp_path / "data"
    fake_mnist(data)
    images = data / "MNIST" / "raw" / "train-images-idx3-ubyte"
    raw = images.read_bytes()
    images.write_bytes(raw[:-100] if damage == "truncate" else b"\x00\x00\x08\x04" + raw[4:])
    _root, proc = cli("data=mnist", "data.download=false", "data.val_size=20", f"paths.data_dir={data}", check=False)
    assert proc.returncode == 2
    expected = "is truncated or corrupt" if damage == "truncate" else "is not an MNIST IDX file: magic number 2052"
    output = proc.stdout + proc.stderr
    assert expected in output and "Traceback" not in output


def test_checkpoint_from_another_model(cli):
    root, _ = cli("trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    _, proc = cli(
        "model=mlp", f"ckpt_path={run}/checkpoints/last.ckpt", check=False
    )  # the folder's name holds '=': quoted
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    assert "was written by a different mixer or network" in output
    assert "missing: net.layers.0.dense.bias, net.layers.0.dense.weight" in output
    assert "unexpected: net.layers.0.k_proj.bias" in output


def test_a_time_limit_given_as_lightning_documents_it_trains(cli):
    """Lightning takes ``max_time`` as ``DD:HH:MM:SS`` or as a mapping of timedelta's fields; Hydra hands a mapping over
    as a config, which Lightning could not read: the Trainer gets plain values."""
    root, proc = cli("+trainer.max_time={minutes: 30}", "trainer.max_epochs=1", check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = run_dirs(root / "outputs")
    assert (run / "metrics.json").is_file()
