"""Reading memory back: the retrieval method, federated recall over the tiers, the optional
reranker, token counting and the token-budgeted context block.
"""
