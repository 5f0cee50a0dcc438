"""TTT Lab from Python: a trained model loaded from a checkpoint, scored, inspected and sampled.

    import tttlab
    model = tttlab.load("assets/models/tiny-brown")
    model.eval("Some text ...")["bpb"]
    model.states("Some text ...", block=0, head=0)["block0.head0.loss_before"]
    model.generate("The ", tokens=100, seed=1)

The computations are the command line's (`tttlab eval`, `tttlab states`, `tttlab generate`) on the
CPU implementation, so the results equal its output bit for bit. docs/PYTHON.md has the API with
shapes and units.
"""

from ._tttlab import Model, inner_loop, inner_loop_grad, load, matrix_rule, matrix_rule_grad

__all__ = ["Model", "inner_loop", "inner_loop_grad", "load", "matrix_rule", "matrix_rule_grad"]
