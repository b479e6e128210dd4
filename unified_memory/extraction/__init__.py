"""What becomes long-term knowledge: rule and LLM extraction, promotion out of the window,
and the summarizers of what leaves it.
"""
