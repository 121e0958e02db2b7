"""The `peaks` op: measured GPU peaks for rooflines (kagent_eval.roofline measures them)."""


def run(ch, spec):
    ch.stage("run")
    device = spec["device"]
    if not device.startswith("cuda"):
        ch.send({"type": "peaks", "result": {"device": device, "note": "CPU mode: no GPU peaks"}})
        return
    import torch
    torch.cuda.init()
    from . import roofline
    ch.send({"type": "peaks", "result": roofline.measure_peaks(0)})
