"""Error estimates from the physics: how far a prediction, or the frames it was given, is from satisfying the PDE
its data were made with, computed without the truth.

- **Darcy** ``-div(a grad u) = f``, ``u = 0`` on the boundary (nodes ``x_i = i h``, ``h = 1 / (n - 1)``): the
  residual ``r = f + div(a grad u_pred)`` of the solver's own 5-point scheme (harmonic face means) at the interior
  nodes. The error ``e = u - u_pred`` of the discrete solution solves ``A e = r`` exactly; the estimate is the
  iterate of a few conjugate-gradient steps on it from zero, preconditioned by the fast sine-transform Poisson solve
  of ``-Laplacian_h`` (each step one application of ``A``, one Poisson solve), and its L2 norm over ``|u_pred|`` is
  the relative-error estimate. ``A`` lies between ``min(a)`` and ``max(a)`` times ``-Laplacian_h``, so after ``k``
  steps the estimate's energy-norm error is at most ``2 q^k`` times the error's, ``q = (sqrt(K) - 1) / (sqrt(K) +
  1)``, ``K = max(a) / min(a)``: each input takes the fewest steps that make this at most :data:`DARCY_TOLERANCE`
  (3 at the contrast 4 of the paper's data, 5 at 10; one for a constant ``a``, where the estimate is the error
  exactly). One Poisson solve over ``mean(a)`` alone (the estimate of calibrations that record no tolerance) is off
  by a factor that depends on the coefficient's geometry, not only on its contrast: at a shorter correlation length
  its ratio to the error drifts, and so would a bound calibrated on it.
- **2D vorticity** ``w_t + u . grad w = nu Laplacian w - drag w + f`` on a periodic square (FNO-nu, Kolmogorov flow):
  the residual of consecutive frames ``w_k, w_k+1`` a time ``h`` apart, with viscosity, drag and the steady forcing
  integrated exactly and advection by the trapezoidal rule (pseudo-spectral, 2/3 de-aliased):
  ``R = c_k+1 - E c_k - phi f - h / 2 (E N(c_k) + N(c_k+1))``, ``E = exp(L h)``, ``phi = (E - 1) / L``,
  ``L = -nu |k|^2 - drag``, ``N(c) = -u . grad w``. It vanishes for every exact solution whose advection is zero
  (Taylor-Green vortices, the laminar Kolmogorov state), and is ``O(h^3)`` per step otherwise.

Estimates, per sample: of a forecast frame, the residual accumulated over the steps from the last given frame to
it, over the frame's size (:func:`forecast_estimates`); of the given frames, the mean residual of their steps over
their size (:func:`history_estimates`): frames evolving under another viscosity or forcing than the calibrated one
leave a residual that the calibration frames do not have. A normalized conformal score divides an observed error by
its estimate (:func:`normalized_scores`); its quantile times a new input's estimate is that input's bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from opformer.pde.registry import VORTICITY_ESTIMATE, stored_pde

#: The energy-norm accuracy, relative to the error's, that the conjugate-gradient steps of the Darcy estimate are
#: taken for (:func:`cg_steps`).
DARCY_TOLERANCE = 0.1


def _rms(x: torch.Tensor, first_axis: int) -> torch.Tensor:
    """Root mean square over the axes from ``first_axis`` on."""
    return x.pow(2).flatten(first_axis).mean(dim=-1).sqrt()


# Darcy.

def darcy_residual(a: torch.Tensor, u: torch.Tensor, f: float | torch.Tensor = 1.0) -> torch.Tensor:
    """``f + div(a grad u)`` of the 5-point harmonic-face scheme at the interior nodes: ``(batch, n - 2, n - 2)``
    float64, from nodal ``a`` and ``u`` ``(batch, n, n)`` on ``[0, 1]^2`` (``u``'s boundary values as given)."""
    a, u = a.double(), u.double()
    h = 1.0 / (a.shape[-1] - 1)
    ax = 2 * a[:, 1:] * a[:, :-1] / (a[:, 1:] + a[:, :-1])  # faces i + 1/2: (batch, n - 1, n)
    ay = 2 * a[:, :, 1:] * a[:, :, :-1] / (a[:, :, 1:] + a[:, :, :-1])
    fx = ax * (u[:, 1:] - u[:, :-1])  # h times the flux through each face
    fy = ay * (u[:, :, 1:] - u[:, :, :-1])
    divergence = (fx[:, 1:, 1:-1] - fx[:, :-1, 1:-1] + fy[:, 1:-1, 1:] - fy[:, 1:-1, :-1]) / h**2
    forcing = f if isinstance(f, (int, float)) else torch.as_tensor(f, dtype=torch.float64)[..., 1:-1, 1:-1]
    return forcing + divergence


def _dst1(x: torch.Tensor, axis: int) -> torch.Tensor:
    """The type-I discrete sine transform ``X_k = sum_j x_j sin(pi j k / (m + 1))`` along ``axis`` (by an FFT of the
    odd extension)."""
    x = x.movedim(axis, -1)
    zero = torch.zeros_like(x[..., :1])
    odd = torch.cat([zero, x, zero, -x.flip(-1)], dim=-1)
    return (-torch.fft.fft(odd, dim=-1).imag[..., 1:x.shape[-1] + 1] / 2).movedim(-1, axis)


def inverse_laplacian(r: torch.Tensor) -> torch.Tensor:
    """``e`` with ``-Laplacian_h e = r`` (5-point, ``h = 1 / (m + 1)``, zero Dirichlet values) for interior values
    ``r`` ``(batch, m, m)``."""
    m = r.shape[-1]
    h = 1.0 / (m + 1)
    s = torch.sin(torch.arange(1, m + 1, dtype=r.dtype, device=r.device) * math.pi / (2 * (m + 1))).pow(2)
    eigenvalues = 4 * (s[:, None] + s[None, :]) / h**2
    spectrum = _dst1(_dst1(r, -1), -2) / eigenvalues
    return _dst1(_dst1(spectrum, -1), -2) * (2 / (m + 1)) ** 2


def darcy_operator(a: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``A e = -div(a grad e)`` of the 5-point harmonic-face scheme for interior values ``e`` ``(batch, n - 2,
    n - 2)`` (zero on the boundary) of nodal coefficients ``a`` ``(batch, n, n)``."""
    return -darcy_residual(a, torch.nn.functional.pad(e.double(), (1, 1, 1, 1)), 0.0)


def contraction(a: torch.Tensor) -> torch.Tensor:
    """``(batch,)``: the factor ``(sqrt(K) - 1) / (sqrt(K) + 1)`` by which each conjugate-gradient step contracts the
    energy-norm error bound of ``A e = r`` preconditioned by ``-Laplacian_h``, ``K = max(a) / min(a)`` (the face
    means lie between them, so ``A`` lies between ``min(a)`` and ``max(a)`` times ``-Laplacian_h``)."""
    a = a.double().flatten(1)
    root = (a.amax(dim=1) / a.amin(dim=1)).sqrt()
    return (root - 1) / (root + 1)


def cg_steps(a: torch.Tensor, tolerance: float) -> torch.Tensor:
    """``(batch,)``: the fewest conjugate-gradient steps (at least one) whose a-priori bound
    ``2 contraction(a)^k`` is at most ``tolerance``: the estimate's energy-norm error is then at most ``tolerance``
    times the error's."""
    rate = contraction(a)
    steps = torch.ceil(math.log(2 / tolerance) / -rate.log())  # rate 0 (a constant a): 0
    return torch.where(rate < 1, steps, 1.0).clamp_min(1).long()  # no bound (a zero a: rate NaN): one step


def conjugate_gradients(a: torch.Tensor, r: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """The iterate of ``steps`` ``(batch,)`` conjugate-gradient steps from zero on ``A e = r`` (``r`` ``(batch,
    n - 2, n - 2)``, :func:`darcy_operator`), preconditioned by the fast Poisson solve (:func:`inverse_laplacian`):
    each step one application of ``A`` and one Poisson solve; a sample stops after its own number of steps."""
    def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x * y).flatten(1).sum(dim=1)[:, None, None]

    r = r.double()
    x = torch.zeros_like(r)
    z = inverse_laplacian(r)
    p, rz = z, dot(r, z)
    for step in range(int(steps.max()) if len(steps) else 0):
        active = (steps > step).double()[:, None, None]
        ap = darcy_operator(a, p)
        curvature = dot(p, ap)
        alpha = active * rz / torch.where(curvature > 0, curvature, 1.0)  # 0 past a sample's steps or where r = 0
        x, r = x + alpha * p, r - alpha * ap
        z = inverse_laplacian(r)
        rz_next = dot(r, z)
        p, rz = z + rz_next / torch.where(rz > 0, rz, 1.0) * p, rz_next
    return x


def darcy_error_estimate(a: torch.Tensor, u: torch.Tensor, f: float | torch.Tensor = 1.0,
                         tolerance: float | None = DARCY_TOLERANCE) -> torch.Tensor:
    """The estimated error field of a Darcy prediction ``u`` at the interior nodes ``(batch, n - 2, n - 2)``: the
    :func:`conjugate_gradients` iterate on ``A e = r`` after :func:`cg_steps` steps (the error itself for a constant
    ``a``). ``tolerance`` None: ``(-Laplacian_h)^-1 r / mean(a)``, the one Poisson solve of calibrations that record
    no tolerance."""
    r = darcy_residual(a, u, f)
    if tolerance is None:
        return inverse_laplacian(r) / a.double().flatten(1).mean(dim=1)[:, None, None]
    return conjugate_gradients(a, r, cg_steps(a, tolerance))


def darcy_estimates(a: torch.Tensor, u: torch.Tensor, f: float | torch.Tensor = 1.0,
                    tolerance: float | None = DARCY_TOLERANCE) -> torch.Tensor:
    """``(batch,)``: the estimated relative L2 error of Darcy predictions ``u`` ``(batch, n, n)`` of coefficients
    ``a`` (the estimated error's norm, :func:`darcy_error_estimate`, over the prediction's, both over the whole
    grid)."""
    error = darcy_error_estimate(a, u, f, tolerance)
    n = u.shape[-1]
    return error.pow(2).flatten(1).sum(dim=1).sqrt() / (_rms(u.double(), 1) * n + torch.finfo(torch.float64).tiny)


# The 2D vorticity equation.

@dataclass(frozen=True)
class Vorticity:
    """The 2D vorticity equation on the periodic square ``[0, length)^2``: viscosity, drag, the steady vorticity
    forcing on the ``n x n`` grid (None: none) and the time ``spacing`` between the frames it is applied to."""

    nu: float
    drag: float
    length: float
    spacing: float
    forcing: torch.Tensor | None = None

    def _operators(self, n: int, device: torch.device) -> dict[str, torch.Tensor]:
        m = torch.fft.fftfreq(n, 1.0 / n, dtype=torch.float64, device=device)
        kx = (2 * math.pi / self.length) * m[:, None]
        ky = (2 * math.pi / self.length) * torch.arange(n // 2 + 1, dtype=torch.float64, device=device)[None, :]
        k2 = kx**2 + ky**2
        cut = (n - 1) // 3 + 0.5
        mask = ((m.abs()[:, None] <= cut) & (ky * self.length / (2 * math.pi) <= cut)).double()
        linear = -self.nu * k2 - self.drag
        decay = torch.exp(linear * self.spacing)
        phi = torch.where(linear != 0, (decay - 1) / torch.where(linear != 0, linear, 1.0),
                          torch.full_like(linear, self.spacing))
        inv_k2 = torch.where(k2 > 0, 1 / torch.where(k2 > 0, k2, 1.0), 0.0)
        return {"ikx": 1j * kx * mask, "iky": 1j * ky * mask, "inv_k2": inv_k2, "mask": mask, "decay": decay,
                "phi": phi}

    def _advection(self, c: torch.Tensor, ops: dict[str, torch.Tensor], n: int) -> torch.Tensor:
        """Modes of ``-u . grad w`` (de-aliased) of the half spectra ``c`` (``norm='forward'``)."""
        psi = c * ops["inv_k2"]
        spectra = torch.stack([ops["iky"] * psi, -ops["ikx"] * psi, ops["ikx"] * c, ops["iky"] * c])
        u, v, wx, wy = torch.fft.irfft2(spectra, s=(n, n), norm="forward")
        return -ops["mask"] * torch.fft.rfft2(u * wx + v * wy, norm="forward")

    def residual(self, frames: torch.Tensor) -> torch.Tensor:
        """``(batch, time - 1, n, n)`` float64: the residual field of each step between consecutive frames
        ``(batch, time, n, n)`` (point values on ``x_i = i length / n``, axis order ``(x, y)``)."""
        w = frames.double()
        n = w.shape[-1]
        ops = self._operators(n, w.device)
        c = torch.fft.rfft2(w, norm="forward")
        advection = self._advection(c.flatten(0, 1), ops, n).reshape(c.shape)
        force = 0.0 if self.forcing is None else \
            ops["phi"] * torch.fft.rfft2(self.forcing.double().to(w.device), norm="forward")
        decay = ops["decay"]
        r = c[:, 1:] - decay * c[:, :-1] - force - self.spacing / 2 * (decay * advection[:, :-1] + advection[:, 1:])
        return torch.fft.irfft2(r, s=(n, n), norm="forward")


def forecast_estimates(physics: Vorticity, last_given: torch.Tensor, forecast: torch.Tensor) -> torch.Tensor:
    """``(batch, frames)``: the estimated relative error of each forecast frame ``(batch, frames, n, n)`` after the
    last given one ``(batch, n, n)``: the root-mean-square residuals of the steps up to that frame, summed, over the
    frame's root mean square."""
    path = torch.cat([last_given[:, None].double(), forecast.double()], dim=1)
    steps = _rms(physics.residual(path), 2)
    return steps.cumsum(dim=1) / (_rms(forecast.double(), 2) + torch.finfo(torch.float64).tiny)


def history_estimates(physics: Vorticity, given: torch.Tensor) -> torch.Tensor:
    """``(batch,)``: how far the given frames ``(batch, time, n, n)`` (two or more) are from evolving by the
    equation: the mean root-mean-square residual of their steps over the frames' root mean square."""
    given = given.double()
    return _rms(physics.residual(given), 2).mean(dim=1) / (_rms(given, 1) + torch.finfo(torch.float64).tiny)


def vorticity_physics(pde: dict[str, Any], n: int, spacing: float) -> Vorticity | None:
    """The vorticity equation a data file's ``pde`` settings record, on the ``n x n`` storage grid, for frames
    ``spacing`` apart; None where the settings name no equation this module knows (another PDE, another forcing):
    the PDE's registry entry (:func:`opformer.pde.registry.stored_pde`) has the vorticity estimate and its forcing."""
    entry = stored_pde(pde)
    if entry is None or entry.estimate != VORTICITY_ESTIMATE or entry.forcing is None or not entry.own_forcing(pde):
        return None
    forcing, length = torch.from_numpy(entry.forcing.vorticity(n)), float(pde.get("length", entry.length))
    return Vorticity(float(pde["nu"]), float(pde.get("drag", 0.0)), length, float(spacing), forcing)


# Scores.

def normalized_scores(errors: torch.Tensor, estimates: torch.Tensor) -> torch.Tensor:
    """Observed errors over their estimates (float64; an estimate of zero gives ``+inf`` for a non-zero error):
    split conformal on these scores bounds a new error by the quantile times the new input's estimate, with the same
    finite-sample guarantee as the plain errors."""
    errors, estimates = errors.double(), estimates.double()
    return torch.where(errors == 0, torch.zeros_like(errors), errors / estimates)
