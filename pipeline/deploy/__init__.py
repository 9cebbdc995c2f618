"""``lockpipe deploy``: a smoke-tested image as a podman quadlet, checked before it is installed.

- :mod:`~pipeline.deploy.keys`: the [Container] keys each podman's quadlet accepts.
- :mod:`~pipeline.deploy.unit`: unit files and systemd's quoting.
- :mod:`~pipeline.deploy.render`: the ``.container`` from resolved inputs (pure).
- :mod:`~pipeline.deploy.plan`: a lock target (or an external one) into those inputs.
- :mod:`~pipeline.deploy.gate`: the build record to pin, the smoke report that allows it.
- :mod:`~pipeline.deploy.external`: targets built elsewhere, pinned by digest (frank-large).
- :mod:`~pipeline.deploy.verify`: podman's generator dry run, systemd-analyze verify.
- :mod:`~pipeline.deploy.cdi`: the host's CDI specs a ``--gpu-mode cdi`` unit needs.
- :mod:`~pipeline.deploy.install`: check the CDI spec, wait for the port, write atomically,
  start on request.

It sits above :mod:`pipeline.smoke` (it reuses its port wait, GPU attach and command
placeholders) and below :mod:`pipeline.cli`.
"""
