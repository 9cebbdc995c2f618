"""registry"""
