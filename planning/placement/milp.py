"""The one door to the integer-programming solver (OR-Tools CP-SAT).

RULE. A problem is a list of integer variables, each in `[lower, upper]`, linear constraints
`low <= sum(coefficient * variable) <= high`, and a linear objective to minimise. The answer is
the status (`optimal`, `feasible`: a solution the budget did not prove best, `infeasible`:
proven that none exists, `unknown`: the budget ran out before either), the values of the best
solution found, its objective, and `bound`: a proven lower bound on the objective of every
solution (equal to the objective when optimal), and `work`: the deterministic seconds spent, so
that a caller solving several programs can share one budget among them. All coefficients are
integers, so the bound is rounded up to one.

BUDGET, NOT CLOCK. The search stops after `deterministic_seconds` of CP-SAT's deterministic
time (a count of work, not the wall clock) on one worker with a fixed seed: the same problem
always gives the same answer, on any machine, under any load.

A hint (a full assignment, usually a heuristic's solution) starts the search from it; an
infeasible hint is ignored by the solver. CP-SAT 9.15 can fail inside its symmetry detection on
some hinted models (`IndexError: absl::btree_map::at`, a small balance model with slacks); the
same problem is then solved again with symmetry detection off (`symmetry_level = 0`), which
solves it. Deterministic either way: the same problem fails, or not, the same way every time.

Pure from the caller's side: values in, a fresh value out; no clock, no global state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence


@dataclass(frozen=True)
class LinearConstraint:
    """`low <= sum(coefficients[i] * x[variables[i]]) <= high`."""

    variables: tuple[int, ...]
    coefficients: tuple[int, ...]
    low: int
    high: int


@dataclass(frozen=True)
class IntegerProgram:
    """Minimise `sum(objective[i] * x[objective_variables[i]])` under the constraints."""

    lowers: tuple[int, ...]
    uppers: tuple[int, ...]
    constraints: tuple[LinearConstraint, ...]
    objective_variables: tuple[int, ...]
    objective: tuple[int, ...]
    hint: tuple[int, ...] | None = None


@dataclass(frozen=True)
class IntegerSolution:
    status: str  # optimal | feasible | infeasible | unknown
    objective: int | None
    bound: int | None  # proven: no solution has a smaller objective (None when infeasible)
    values: tuple[int, ...] = field(default=())
    work: float = 0.0  # the deterministic seconds the search spent (the same for the same problem)


def solve_integer_program(program: IntegerProgram, deterministic_seconds: float) -> IntegerSolution:
    """The least-objective solution within the budget (see the module docstring)."""
    # Imported at first use: CP-SAT's Python layer loads pandas (about 0.4 s of CPU), which
    # every command line would otherwise pay at start (`reassigner --version`).
    from ortools.sat.python import cp_model

    def build():
        model = cp_model.CpModel()
        xs = [model.new_int_var(lo, hi, f"x{i}") for i, (lo, hi) in enumerate(zip(program.lowers, program.uppers))]
        for c in program.constraints:
            model.add_linear_constraint(
                cp_model.LinearExpr.weighted_sum([xs[v] for v in c.variables], list(c.coefficients)), c.low, c.high)
        model.minimize(cp_model.LinearExpr.weighted_sum([xs[v] for v in program.objective_variables],
                                                        list(program.objective)))
        if program.hint is not None:
            for x, value in zip(xs, program.hint):
                model.add_hint(x, value)
        return model, xs

    def solve(symmetry: bool):
        model, xs = build()  # a model a failed solve has seen is not reused
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = 0
        solver.parameters.max_deterministic_time = deterministic_seconds
        if not symmetry:
            solver.parameters.symmetry_level = 0
        return solver, xs, solver.solve(model)

    try:
        solver, xs, status = solve(symmetry=True)
    except IndexError:  # CP-SAT's symmetry detection on a hinted model (module docstring)
        solver, xs, status = solve(symmetry=False)
    work = float(solver.deterministic_time)
    if status == cp_model.INFEASIBLE:
        return IntegerSolution("infeasible", None, None, work=work)
    bound = _round_up(solver.best_objective_bound)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        values = tuple(int(solver.value(x)) for x in xs)
        objective = sum(k * values[v] for v, k in zip(program.objective_variables, program.objective))
        return IntegerSolution("optimal" if status == cp_model.OPTIMAL else "feasible", objective,
                               min(bound, objective), values, work)
    return IntegerSolution("unknown", None, bound, work=work)


def _round_up(value: float) -> int:
    """The solver's float bound as an integer bound on an integer objective (a hair of float
    noise below an integer is not a reason to lose a unit)."""
    nearest = round(value)
    return int(nearest) if abs(value - nearest) <= 1e-6 * max(1.0, abs(value)) else math.ceil(value)


def linear(variables: Sequence[int], coefficients: Sequence[int], low: int, high: int) -> LinearConstraint:
    return LinearConstraint(tuple(variables), tuple(coefficients), low, high)
