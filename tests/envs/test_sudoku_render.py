import re

from esopt.agent.rollout import Episode
from esopt.envs import SudokuEnv, generate_puzzle, renderer_for
from esopt.envs.sudoku.render import initial_grid, render_sudoku_episode


def play(moves, blanks=8, seed=3):
    """A real episode (as the rollout records it) with the given replies."""
    puzzle = generate_puzzle(4, blanks, seed)
    env = SudokuEnv(puzzle=puzzle, reward="partial")
    obs, _ = env.reset()
    ep = Episode(task="".join(str(v) for row in puzzle.grid for v in row), observation0=obs)
    for reply in moves(puzzle):
        _, reward, term, trunc, info = env.step(reply)
        ep.turns.append({"response": reply, "action": info["action"], "feedback": info["feedback"], "reward": reward})
        if term or trunc:
            break
    return puzzle, ep.to_json()


def wrong_but_legal(puzzle):
    """A move the env accepts (no conflict) that is not the solution value."""
    for r, c in puzzle.blank_cells:
        for v in range(1, 5):
            row = puzzle.grid[r]
            col = [puzzle.grid[i][c] for i in range(4)]
            box = [puzzle.grid[i][j] for i in range(r - r % 2, r - r % 2 + 2) for j in range(c - c % 2, c - c % 2 + 2)]
            if v != puzzle.solution[r][c] and v not in row and v not in col and v not in box:
                return f"r{r + 1}c{c + 1}={v}"
    raise AssertionError("no legal wrong move")


def test_boards_turn_by_turn_with_the_move_highlighted():
    def moves(p):
        (r, c), given = p.blank_cells[0], next((i, j) for i in range(4) for j in range(4) if p.grid[i][j])
        return [f"r{r + 1}c{c + 1}={p.solution[r][c]}", f"r{given[0] + 1}c{given[1] + 1}=1",
                "<script>alert(1)</script>", wrong_but_legal(p)]

    puzzle, ep = play(moves)
    html = render_sudoku_episode(ep)
    assert html.count('<table class="sdk sdk4">') == 1 + len(ep["turns"]) == 5
    assert len(re.findall(r'<td class="[^"]*\bnew\b', html)) == 2  # the two accepted moves
    assert len(re.findall(r'<td class="[^"]*\brej\b', html)) == 1  # the refused move on a given cell
    assert re.search(r'<td class="(vb )?a bad new">\d</td>', html)  # accepted, but not the solution value
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "is a given cell and cannot be changed" in html and "move none parsed" in html
    assert renderer_for("sudoku") is render_sudoku_episode and "sdk" in render_sudoku_episode.css


def test_board_from_the_observation_when_the_task_is_not_a_grid():
    puzzle, ep = play(lambda p: [], blanks=2)
    want = [list(row) for row in puzzle.grid]
    assert initial_grid(ep) == want
    ep["task"] = "puzzle-7"
    assert initial_grid(ep) == want
    ep["observation0"] = "no board here"
    assert initial_grid(ep) is None
