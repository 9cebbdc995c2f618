"""``lockpipe deploy``: a smoke-tested image as a podman quadlet, checked before it is installed.

- :mod:`~lockpipe.deploy.keys`: the [Container] keys each podman's quadlet accepts.
- :mod:`~lockpipe.deploy.unit`: unit files and systemd's quoting.
- :mod:`~lockpipe.deploy.render`: the ``.container`` from resolved inputs (pure).
- :mod:`~lockpipe.deploy.plan`: a lock target (or an external one) into those inputs.
- :mod:`~lockpipe.deploy.gate`: the build record to pin, the smoke result that allows it.
- :mod:`~lockpipe.deploy.store`: the payload store the unit mounts, its payloads there.
- :mod:`~lockpipe.deploy.external`: targets built elsewhere, pinned by digest (frank-large).
- :mod:`~lockpipe.deploy.verify`: podman's generator dry run, systemd-analyze verify.
- :mod:`~lockpipe.deploy.cdi`: the host's CDI specs a ``--gpu-mode cdi`` unit needs.
- :mod:`~lockpipe.deploy.install`: check the CDI spec, stop a running old instance, wait
  for the port, write atomically, start again (or on request).

It sits above :mod:`lockpipe.smoke` (it reuses its port wait, GPU attach, command
placeholders and smoke.json reader) and below :mod:`lockpipe.cli`.
"""
