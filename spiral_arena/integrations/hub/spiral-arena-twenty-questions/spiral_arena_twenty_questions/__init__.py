"""spiral-arena's Twenty Questions under its Hub id: ``--env.taskset.id spiral-arena-twenty-questions``."""

from spiral_arena.integrations.verifiers_twenty_questions import TwentyQuestionsEnv, TwentyQuestionsTaskset

__all__ = ["TwentyQuestionsEnv", "TwentyQuestionsTaskset"]
